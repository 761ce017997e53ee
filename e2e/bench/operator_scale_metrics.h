// What the operator-scale benchmark reads back: the operator's Prometheus
// text (lockstep_kube_requests_total{verb,resource,code}, reconcile and request
// latency histograms) and latency percentiles. Everything but HttpGet is pure;
// HttpGet does I/O (plain HTTP, no proxy) and is thread-safe.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::bench {

// One scrape: every sample line, keyed by "name{labels}" exactly as rendered.
class MetricSamples {
 public:
  static MetricSamples Parse(std::string_view prometheus_text);
  // Per-series difference (this - earlier), for counters between two scrapes.
  MetricSamples Since(const MetricSamples& earlier) const;

  using LabelFilter = std::initializer_list<std::pair<std::string_view, std::string_view>>;
  // Sum of the samples of metric `name` whose labels include every `filter` pair.
  double Sum(std::string_view name, LabelFilter filter = {}) const;
  // Sum(name_sum) / Sum(name_count) of a histogram, in milliseconds (0 if empty).
  double MeanMs(std::string_view histogram, LabelFilter filter = {}) const;
  // The series of metric `name` with a non-zero value: labels -> value.
  std::map<std::string, double> Series(std::string_view name) const;

 private:
  std::map<std::string, double> samples_;
};

// lockstep_kube_requests_total in total, for leases, and the rest by series.
struct RequestCounts {
  double total = 0;
  double leases = 0;  // resource="leases"
  double non_lease() const { return total - leases; }
  std::string non_lease_detail;  // `verb resource code`: count, ... or "none"
};
RequestCounts CountRequests(const MetricSamples& samples);

// GET http://127.0.0.1:<port><path>; the body of a 2xx response.
Result<std::string> HttpGet(int port, const std::string& path, Nanos timeout);

struct LatencyStats {
  size_t count = 0;
  double p50 = 0, p99 = 0, max = 0;
};
// Nearest-rank percentiles of `samples` (any unit).
LatencyStats Percentiles(std::vector<double> samples);

}  // namespace lockstep::bench
