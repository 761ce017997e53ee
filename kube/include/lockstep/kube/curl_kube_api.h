// CurlKubeApi: KubeApi over libcurl (HTTP/1.1 or HTTP/2, TLS via OpenSSL).
//
// Thread-safe: every call borrows an easy handle from a small pool (so TCP/TLS
// connections are reused) and never shares it with another thread. Watch()
// runs its own multi handle and notices `stop` within ~50 ms. Every curl and
// JSON failure is returned as an Error; nothing throws.
//
//   auto cfg = LoadDefaultConfig(flags);
//   auto api = CurlKubeApi::FromConfig(*cfg, SystemClock::Instance(), {.registry = &registry});
//   auto pod = (*api)->Get(gvr::kPods, "default", "p");
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/kube_config.h"
#include "lockstep/kube/token_source.h"
#include "lockstep/kube/verb.h"

namespace lockstep::kube {

struct CurlKubeApiOptions {
  Nanos request_timeout = std::chrono::seconds(30);  // whole non-watch request
  Nanos connect_timeout = std::chrono::seconds(10);
  std::string user_agent = "lockstep/0.1";
  Nanos token_reread_interval = std::chrono::minutes(1);
  // Optional: lockstep_kube_requests_total{verb,resource,code} and
  // lockstep_kube_request_duration_seconds{verb}. Must outlive the api.
  metrics::Registry* registry = nullptr;
  size_t max_idle_handles = 16;
};

class CurlKubeApi final : public KubeApi {
 public:
  // Validates the config (readable CA/cert/key files) and initializes libcurl
  // once per process. REQUIRES: `clock` outlives the api.
  static Result<std::unique_ptr<CurlKubeApi>> FromConfig(const KubeConfig& config, Clock& clock,
                                                         CurlKubeApiOptions options = {});
  ~CurlKubeApi() override;
  CurlKubeApi(const CurlKubeApi&) = delete;
  CurlKubeApi& operator=(const CurlKubeApi&) = delete;

  Result<Json> Get(const Gvr& r, const std::string& ns, const std::string& name) override;
  Result<Json> List(const Gvr& r, const std::string& ns, const ListOptions& opts) override;
  Result<Json> Create(const Gvr& r, const std::string& ns, const Json& obj) override;
  Result<Json> Update(const Gvr& r, const std::string& ns, const Json& obj,
                      const std::string& subresource = "") override;
  Result<Json> MergePatch(const Gvr& r, const std::string& ns, const std::string& name, const Json& patch,
                          const std::string& subresource = "") override;
  Result<Json> Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                     const ApplyOptions& opts, const std::string& subresource = "") override;
  Status Delete(const Gvr& r, const std::string& ns, const std::string& name,
                const std::string& uid_precondition = "",
                std::optional<int64_t> grace_period_seconds = std::nullopt) override;
  Status Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts, const WatchHandler& handler,
               const std::atomic<bool>& stop) override;

  // Requests sent (including failed ones), in total and per verb. Lock-free.
  uint64_t RequestCount() const;
  uint64_t RequestCount(Verb v) const { return counts_[static_cast<size_t>(v)].load(std::memory_order_relaxed); }

  const KubeConfig& config() const { return config_; }

 private:
  struct Request;
  struct Response {
    long status = 0;
    std::string body{};
  };

  CurlKubeApi(KubeConfig config, Clock& clock, CurlKubeApiOptions options);
  // Sends one request; an HTTP status >= 300 is mapped to an Error.
  Result<Json> Do(const Request& req);
  Result<Response> Perform(const Request& req);
  // Sets URL, TLS, auth and common headers on `curl` (a CURL*). Headers are
  // appended to *headers (a curl_slist*, freed by the caller).
  Status Configure(void* curl, const std::string& path_and_query, void** headers);
  // `resource` is the plural resource name ("leases"), without subresource.
  void Count(Verb v, const std::string& resource, const std::string& code, Nanos elapsed);
  void* Borrow();
  void Return(void* curl);

  KubeConfig config_;
  Clock& clock_;
  CurlKubeApiOptions options_;
  TokenSource token_;
  std::array<std::atomic<uint64_t>, kNumVerbs> counts_{};
  metrics::Family* requests_metric_ = nullptr;
  metrics::Family* duration_metric_ = nullptr;

  std::mutex pool_mu_;
  std::vector<void*> idle_;  // GUARDED_BY(pool_mu_); CURL* handles with warm connections
};

}  // namespace lockstep::kube
