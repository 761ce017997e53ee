#include "lockstep/nccl/traffic_control.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lockstep::nccl {

Status ValidateTrafficControlOptions(const TrafficControlOptions& o) {
  if (!(o.ratio > 1.0))
    return InvalidArgument("traffic control: ratio must be above 1 (got " + std::to_string(o.ratio) + ")");
  if (o.margin_ns <= 0) return InvalidArgument("traffic control: margin must be positive");
  if (o.enter_after < 1 || o.exit_after < 1) return InvalidArgument("traffic control: enter/exit counts must be >= 1");
  if (!(o.contended_weight > 0.0 && o.contended_weight <= 1.0)) {
    return InvalidArgument("traffic control: contended weight must be in (0, 1] (got " +
                           std::to_string(o.contended_weight) + ")");
  }
  if (o.baseline_rise_ns < 0) return InvalidArgument("traffic control: baseline rise must be >= 0");
  return Status::Ok();
}

TrafficControl::TrafficControl(int nstreams, TrafficControlOptions options)
    : o_(options), s_(static_cast<size_t>(std::max(nstreams, 1))) {}

int64_t TrafficControl::Threshold(const Stream& s) const {
  const double rel = (o_.ratio - 1.0) * static_cast<double>(std::max<int64_t>(s.baseline, 0));
  return std::max<int64_t>(o_.margin_ns, static_cast<int64_t>(rel));
}

std::vector<WeightChange> TrafficControl::Update(const std::vector<std::optional<int64_t>>& delay_ns) {
  const size_t n = s_.size();
  // Baselines first (the lowest delay seen; rising slowly while not contended).
  for (size_t i = 0; i < n && i < delay_ns.size(); ++i) {
    if (!delay_ns[i]) continue;
    Stream& s = s_[i];
    if (!s.has_baseline) {
      s.has_baseline = true;
      s.baseline = *delay_ns[i];
    } else if (*delay_ns[i] < s.baseline) {
      s.baseline = *delay_ns[i];
    } else if (!s.contended) {
      s.baseline = std::min(*delay_ns[i], s.baseline + o_.baseline_rise_ns);
    }
  }
  // Each stream's excess in thresholds (nullopt without a sample this update).
  std::vector<std::optional<double>> level(n);
  for (size_t i = 0; i < n && i < delay_ns.size(); ++i) {
    if (!delay_ns[i]) continue;
    level[i] = static_cast<double>(*delay_ns[i] - s_[i].baseline) / static_cast<double>(Threshold(s_[i]));
  }
  std::vector<WeightChange> changes;
  for (size_t i = 0; i < n; ++i) {
    if (!level[i]) continue;  // no news: keep the state and the run
    Stream& s = s_[i];
    bool want_change;
    if (!s.contended) {
      std::vector<double> others;
      for (size_t j = 0; j < n; ++j) {
        if (j != i && level[j]) others.push_back(*level[j]);
      }
      bool calm = false;
      if (!others.empty()) {
        std::nth_element(others.begin(), others.begin() + static_cast<long>(others.size() / 2), others.end());
        calm = others[others.size() / 2] < 0.5;
      }
      want_change = *level[i] > 1.0 && calm;
    } else {
      want_change = *level[i] < 0.5;
    }
    s.run = want_change ? s.run + 1 : 0;
    if (s.run >= (s.contended ? o_.exit_after : o_.enter_after)) {
      s.contended = !s.contended;
      s.run = 0;
      ++rebalances_;
      changes.push_back(WeightChange{.stream = static_cast<int>(i),
                                     .contended = s.contended,
                                     .delay_ns = *delay_ns[i],
                                     .baseline_ns = s.baseline});
    }
  }
  return changes;
}

double TrafficControl::Weight(int stream) const { return s_[stream].contended ? o_.contended_weight : 1.0; }

std::optional<int64_t> TrafficControl::Baseline(int stream) const {
  if (!s_[stream].has_baseline) return std::nullopt;
  return s_[stream].baseline;
}

bool AckStalled(uint32_t unacked_segments, int64_t ms_in_flight, uint32_t ms_since_ack, uint32_t timeout_ms) {
  return timeout_ms > 0 && unacked_segments > 0 && ms_in_flight >= timeout_ms && ms_since_ack >= timeout_ms;
}

std::vector<bool> UsableStreams(const std::vector<bool>& open, const std::vector<bool>& agent_usable) {
  std::vector<bool> out(open.size(), false);
  bool any = false;
  for (size_t i = 0; i < open.size(); ++i) {
    out[i] = open[i] && (i >= agent_usable.size() || agent_usable[i]);
    any = any || out[i];
  }
  return any ? out : open;
}

uint32_t WeightedWindow(uint32_t window, double weight) {
  const double w = std::round(static_cast<double>(window) * std::clamp(weight, 0.0, 1.0));
  return std::max<uint32_t>(1, static_cast<uint32_t>(w));
}

}  // namespace lockstep::nccl
