// The operator's mutating admission webhook (docs/migration.md, "Kubeflow
// jobs"): an HTTPS server (Boost.Beast over OpenSSL) that answers the API
// server's AdmissionReview v1 POSTs on /mutate-pods with
// MutatePodAdmission(). Its certificate and key are files (the chart's
// Secret, made with helm genCA/genSignedCert, whose CA is the
// MutatingWebhookConfiguration's caBundle).
//
// One thread accepts; each connection is served on its own thread with one
// deadline (socket send/receive timeouts) for the TLS handshake, the request
// and the response; connections beyond max_connections are closed at once;
// request bodies over 4 MiB are refused. Stop() closes the listener and waits
// for the connections in flight (each ends by its deadline).
// Thread-safe: Start once, Stop from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"
#include "lockstep/kube/store.h"
#include "lockstep/operator/pod_mutation.h"

namespace lockstep::op {

using Json = nlohmann::json;

// The AdmissionReview (admission.k8s.io/v1) response to `review` for a pod
// CREATE: allowed always (the webhook never blocks a pod: failurePolicy
// Ignore, and a pod it cannot place is admitted unchanged); a JSONPatch
// (PodMutationPatch) when the pod is a rank of a Kubeflow job that a
// TrainingJob in `trainingjobs` references, with a warning when the pod's
// rank cannot be read. A malformed review yields an error string instead.
//
// `coordinator_url` (--coordinator-address pod-ip: clusters without DNS or a
// Service proxy): the URL of TrainingJob (ns, name)'s coordinator pod, "" while
// it has no IP; then the pod is refused (allowed false, code 503, a message
// naming the TrainingJob) and its controller creates it again later (a Job
// retries a refused creation with backoff, not counted as a failure). Null:
// the coordinator's Service URL (CoordinatorUrl).
using CoordinatorUrlLookup = std::function<std::string(const std::string& ns, const std::string& training_job)>;
Result<Json> MutatePodAdmission(const Json& review, const kube::Store& trainingjobs,
                                const CoordinatorUrlLookup& coordinator_url = nullptr);

struct WebhookServerOptions {
  std::string cert_file;  // PEM certificate chain
  std::string key_file;   // PEM private key
  std::chrono::milliseconds request_timeout{10000};
  int max_connections = 32;
};

class WebhookServer {
 public:
  // Body of an AdmissionReview in, AdmissionReview out (or an error: HTTP 400).
  using Handler = std::function<Result<Json>(const Json& review)>;

  WebhookServer(WebhookServerOptions options, Handler handler);
  ~WebhookServer();  // Stop()s
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Loads the certificate and key, binds host:port (port 0: a free one, see
  // port()) and serves POST /mutate-pods. Errors name the file or address.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }
  uint64_t served() const { return served_.load(); }

 private:
  struct Impl;

  const WebhookServerOptions options_;
  const Handler handler_;
  std::unique_ptr<Impl> impl_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> served_{0};
  int port_ = 0;
};

}  // namespace lockstep::op
