#include "lockstep/common/metrics.h"

#include <cmath>
#include <cstdio>
#include <mutex>

namespace lockstep::metrics {
namespace {

std::string Escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') { o += '\\'; o += c; }
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string Labels(const std::vector<std::string>& names, const LabelValues& values,
                   const std::string& extra = {}) {
  std::string o;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!o.empty()) o += ',';
    o += names[i] + "=\"" + Escape(values[i]) + "\"";
  }
  if (!extra.empty()) { if (!o.empty()) o += ','; o += extra; }
  return o.empty() ? "" : "{" + o + "}";
}

}  // namespace

Family::Family(std::string name, std::string help, Type type, std::vector<std::string> labels,
               std::vector<double> buckets)
    : name_(std::move(name)), help_(std::move(help)), type_(type), labels_(std::move(labels)),
      buckets_(std::move(buckets)) {}

void Family::Inc(const LabelValues& lv, double by) {
  std::lock_guard l(mu_);
  series_[lv].value += by;
}

void Family::Set(const LabelValues& lv, double value) {
  std::lock_guard l(mu_);
  series_[lv].value = value;
}

double Family::Get(const LabelValues& lv) const {
  std::lock_guard l(mu_);
  auto it = series_.find(lv);
  if (it == series_.end()) return 0;
  return type_ == Type::kHistogram ? it->second.count : it->second.value;
}

void Family::Observe(const LabelValues& lv, double value) {
  std::lock_guard l(mu_);
  Series& s = series_[lv];
  if (s.counts.empty()) s.counts.assign(buckets_.size(), 0);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (value <= buckets_[i]) { s.counts[i] += 1; break; }
  }
  s.sum += value;
  s.count += 1;
}

void Family::Remove(const LabelValues& lv) {
  std::lock_guard l(mu_);
  series_.erase(lv);
}

void Family::Render(std::string& out) const {
  static const char* kTypes[] = {"counter", "gauge", "histogram"};
  out += "# HELP " + name_ + " " + help_ + "\n";
  out += "# TYPE " + name_ + " " + kTypes[static_cast<int>(type_)] + "\n";
  std::lock_guard l(mu_);
  for (const auto& [lv, s] : series_) {
    if (type_ != Type::kHistogram) {
      out += name_ + Labels(labels_, lv) + " " + Num(s.value) + "\n";
      continue;
    }
    double cum = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      cum += s.counts.empty() ? 0 : s.counts[i];
      out += name_ + "_bucket" + Labels(labels_, lv, "le=\"" + Num(buckets_[i]) + "\"") + " " + Num(cum) + "\n";
    }
    out += name_ + "_bucket" + Labels(labels_, lv, "le=\"+Inf\"") + " " + Num(s.count) + "\n";
    out += name_ + "_sum" + Labels(labels_, lv) + " " + Num(s.sum) + "\n";
    out += name_ + "_count" + Labels(labels_, lv) + " " + Num(s.count) + "\n";
  }
}

Family& Registry::Add(const std::string& name, std::unique_ptr<Family> f) {
  std::lock_guard l(mu_);
  auto [it, inserted] = families_.try_emplace(name, std::move(f));
  return *it->second;  // re-registering returns the existing family
}

Family& Registry::Counter(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return Add(name, std::make_unique<Family>(name, help, Family::Type::kCounter, std::move(labels)));
}
Family& Registry::Gauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return Add(name, std::make_unique<Family>(name, help, Family::Type::kGauge, std::move(labels)));
}
Family& Registry::Histogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                            std::vector<double> buckets) {
  return Add(name, std::make_unique<Family>(name, help, Family::Type::kHistogram, std::move(labels),
                                            std::move(buckets)));
}

std::string Registry::Render() const {
  std::string out;
  std::lock_guard l(mu_);
  for (const auto& [name, f] : families_) f->Render(out);
  return out;
}

std::vector<double> DefaultSecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace lockstep::metrics
