// A small Prometheus metrics registry: counters, gauges and histograms with
// labels, rendered in the text exposition format. Thread-safe.
//
//   auto& reconciles = registry.Counter("lockstep_reconcile_total", "Reconciles", {"controller", "result"});
//   reconciles.Inc({"fabricpolicy", "success"});
#pragma once

#include <map>
#include <memory>
#include "lockstep/common/pi_mutex.h"
#include <string>
#include <vector>

namespace lockstep::metrics {

using LabelValues = std::vector<std::string>;

class Family {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  Family(std::string name, std::string help, Type type, std::vector<std::string> labels,
         std::vector<double> buckets = {});

  // Counters and gauges.
  void Inc(const LabelValues& lv = {}, double by = 1.0);
  void Set(const LabelValues& lv, double value);
  void Set(double value) { Set({}, value); }
  double Get(const LabelValues& lv = {}) const;
  // Histograms.
  void Observe(const LabelValues& lv, double value);
  void Observe(double value) { Observe({}, value); }
  // Removes one labelled series (e.g. a node that went away).
  void Remove(const LabelValues& lv);

  void Render(std::string& out) const;

 private:
  struct Series {
    double value = 0;               // counter / gauge
    std::vector<double> counts;     // histogram, per bucket (non-cumulative)
    double sum = 0;
    double count = 0;
  };
  std::string name_, help_;
  Type type_;
  std::vector<std::string> labels_;
  std::vector<double> buckets_;
  mutable PiMutex mu_;  // the fabric prober (SCHED_FIFO) updates metrics the scrape reads
  std::map<LabelValues, Series> series_;  // GUARDED_BY(mu_)
};

class Registry {
 public:
  Family& Counter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family& Gauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family& Histogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                    std::vector<double> buckets);
  std::string Render() const;

 private:
  Family& Add(const std::string& name, std::unique_ptr<Family> f);
  mutable PiMutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;  // GUARDED_BY(mu_)
};

// Default latency buckets in seconds (1 ms .. 10 s).
std::vector<double> DefaultSecondsBuckets();

}  // namespace lockstep::metrics
