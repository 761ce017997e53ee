#include "operator_scale_metrics.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace lockstep::bench {
namespace {

// The value of label `name` in `labels` (the text between the braces).
std::string Label(std::string_view labels, std::string_view name) {
  std::string key = std::string(name) + "=\"";
  for (size_t pos = 0; (pos = labels.find(key, pos)) != std::string_view::npos; pos += key.size()) {
    if (pos != 0 && labels[pos - 1] != ',') continue;  // "resource" must not match "xresource"
    size_t start = pos + key.size();
    size_t end = labels.find('"', start);
    if (end == std::string_view::npos) return "";
    return std::string(labels.substr(start, end - start));
  }
  return "";
}

// Splits "name{labels}" into name and labels.
std::pair<std::string_view, std::string_view> SplitSeries(std::string_view series) {
  size_t brace = series.find('{');
  if (brace == std::string_view::npos) return {series, {}};
  return {series.substr(0, brace), series.substr(brace + 1, series.size() - brace - 2)};
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

MetricSamples MetricSamples::Parse(std::string_view text) {
  MetricSamples m;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    m.samples_[std::string(line.substr(0, space))] = std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return m;
}

MetricSamples MetricSamples::Since(const MetricSamples& earlier) const {
  MetricSamples d;
  for (const auto& [series, v] : samples_) {
    auto it = earlier.samples_.find(series);
    d.samples_[series] = v - (it == earlier.samples_.end() ? 0 : it->second);
  }
  return d;
}

double MetricSamples::Sum(std::string_view name, LabelFilter filter) const {
  double sum = 0;
  for (const auto& [series, v] : samples_) {
    auto [n, labels] = SplitSeries(series);
    if (n != name) continue;
    bool match = true;
    for (const auto& [k, want] : filter) match = match && Label(labels, k) == want;
    if (match) sum += v;
  }
  return sum;
}

double MetricSamples::MeanMs(std::string_view histogram, LabelFilter filter) const {
  double count = Sum(std::string(histogram) + "_count", filter);
  return count > 0 ? 1000 * Sum(std::string(histogram) + "_sum", filter) / count : 0;
}

std::map<std::string, double> MetricSamples::Series(std::string_view name) const {
  std::map<std::string, double> out;
  for (const auto& [series, v] : samples_) {
    auto [n, labels] = SplitSeries(series);
    if (n == name && v != 0) out[std::string(labels)] = v;
  }
  return out;
}

RequestCounts CountRequests(const MetricSamples& samples) {
  constexpr std::string_view kRequests = "lockstep_kube_requests_total";
  RequestCounts c;
  c.total = samples.Sum(kRequests);
  c.leases = samples.Sum(kRequests, {{"resource", "leases"}});
  for (const auto& [labels, v] : samples.Series(kRequests)) {
    if (Label(labels, "resource") == "leases") continue;
    c.non_lease_detail += (c.non_lease_detail.empty() ? "" : ", ") + Label(labels, "verb") + " " +
                          Label(labels, "resource") + " " + Label(labels, "code") + ": " +
                          std::to_string(std::llround(v));
  }
  if (c.non_lease_detail.empty()) c.non_lease_detail = "none";
  return c;
}

Result<std::string> HttpGet(int port, const std::string& path, Nanos timeout) {
  std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  CURL* c = curl_easy_init();
  if (c == nullptr) return Internal("curl_easy_init failed");
  std::string body;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) return Unavailable("GET " + url + ": " + curl_easy_strerror(rc));
  if (status < 200 || status >= 300) {
    return Unavailable("GET " + url + ": HTTP " + std::to_string(status) + ": " + body.substr(0, 200));
  }
  return body;
}

LatencyStats Percentiles(std::vector<double> v) {
  LatencyStats s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(k, 1, v.size()) - 1];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = v.back();
  return s;
}

}  // namespace lockstep::bench
