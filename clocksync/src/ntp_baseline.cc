#include "lockstep/clocksync/ntp_baseline.h"

#include <algorithm>
#include <vector>

namespace lockstep::clocksync {

Result<NtpEstimate> NtpBaseline(std::span<const NtpProbe> forward,
                                std::span<const NtpProbe> reverse,
                                const NtpOptions& options) {
  struct Exchange { int64_t t1, t2, t3, t4; };
  thread_local std::vector<NtpProbe> f, r;  // scratch, reused across calls
  thread_local std::vector<Exchange> ex;
  f.assign(forward.begin(), forward.end());
  r.assign(reverse.begin(), reverse.end());
  ex.clear();
  // Both sorted on b's clock: forward by receive time t2, reverse by send time t3.
  const auto by_rx = [](const NtpProbe& x, const NtpProbe& y) { return x.rx_ns < y.rx_ns; };
  const auto by_tx = [](const NtpProbe& x, const NtpProbe& y) { return x.tx_ns < y.tx_ns; };
  if (!std::is_sorted(f.begin(), f.end(), by_rx)) std::sort(f.begin(), f.end(), by_rx);
  if (!std::is_sorted(r.begin(), r.end(), by_tx)) std::sort(r.begin(), r.end(), by_tx);

  size_t j = 0;
  for (const NtpProbe& p : f) {
    while (j < r.size() && r[j].tx_ns < p.rx_ns) ++j;
    if (j == r.size()) break;
    if (r[j].tx_ns - p.rx_ns > options.max_hold_ns) continue;
    ex.push_back({p.tx_ns, p.rx_ns, r[j].tx_ns, r[j].rx_ns});
    ++j;  // each response answers one request
  }
  if (ex.empty()) return NotFound("NtpBaseline: no request/response exchange within max_hold_ns");
  const auto by_t1 = [](const Exchange& x, const Exchange& y) { return x.t1 < y.t1; };
  if (!std::is_sorted(ex.begin(), ex.end(), by_t1)) std::sort(ex.begin(), ex.end(), by_t1);
  const size_t first = ex.size() > options.last_n ? ex.size() - options.last_n : 0;
  const Exchange* best = nullptr;
  int64_t best_delay = 0;
  for (size_t k = first; k < ex.size(); ++k) {
    const Exchange& e = ex[k];
    const int64_t delay = (e.t4 - e.t1) - (e.t3 - e.t2);
    if (best == nullptr || delay < best_delay) { best = &e; best_delay = delay; }
  }
  NtpEstimate out;
  out.offset_ns = 0.5 * (static_cast<double>(best->t2 - best->t1) +
                         static_cast<double>(best->t3 - best->t4));
  out.at_ns = best->t1 + (best->t4 - best->t1) / 2;
  out.delay_ns = static_cast<double>(best_delay);
  out.exchanges = static_cast<uint32_t>(ex.size());
  return out;
}

}  // namespace lockstep::clocksync
