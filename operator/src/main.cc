// lockstep-operator: reconciles FabricPolicy into the node agent DaemonSet,
// keeps one FabricHealth per selected node and runs each TrainingJob (its rank
// pods and its coordinator). The wiring is BuildOperator()
// (operator_runtime.h); this file parses flags, builds the adapters (curl API,
// system clock, HTTP endpoints) and waits for a signal. Flags: --help.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/curl_kube_api.h"
#include "lockstep/kube/kube_config.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/operator_runtime.h"
#include "lockstep/operator/probe_key_secret.h"
#include "lockstep/operator/trainingjob_objects.h"
#include "lockstep/operator/web_page.h"
#include "lockstep/operator/webhook_server.h"

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

std::string Env(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

// "[host]:port" -> {host, port}; an empty host means all interfaces.
Result<std::pair<std::string, int>> Address(const std::string& flag, const std::string& v) {
  auto colon = v.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("--" + flag + " must be [HOST]:PORT (got \"" + v + "\")");
  std::string host = v.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(v.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return InvalidArgument("--" + flag + ": bad port in \"" + v + "\"");
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, static_cast<int>(port));
}

struct Flags {
  kube::ConfigFlags config;
  std::string ns = Env("POD_NAMESPACE", "lockstep-system");
  bool leader_elect = true;
  std::string lease_name = "lockstep-operator";
  int lease_s = 15, renew_s = 10, retry_s = 2;
  std::string identity;
  std::string metrics_addr = ":8080", health_addr = ":8081";
  std::string agent_service_account = "lockstep-agent", agent_image, probe_key_secret = "lockstep-probe-key";
  std::string coordinator_image = api::kCoordinatorImage, coordinator_cluster_role = api::kCoordinatorClusterRole;
  std::string coordinator_address = "service";
  int workers = 4;
  std::string log_level = "info";
  bool kubeflow_trainjobs = false, kubeflow_pytorchjobs = false;
  std::string webhook_addr, webhook_cert_dir = "/etc/lockstep/webhook";
  std::string web_addr;
};

int Fail(const std::string& message) {
  std::cerr << "lockstep-operator: " << message << "\n";
  return 2;
}

int Run(const Flags& f) {
  log::SetLevel(f.log_level == "debug"  ? log::Level::kDebug
                : f.log_level == "warn" ? log::Level::kWarn
                : f.log_level == "error" ? log::Level::kError
                                         : log::Level::kInfo);
  log::SetComponent("operator");
  auto metrics_addr = Address("metrics-addr", f.metrics_addr);
  if (!metrics_addr.ok()) return Fail(metrics_addr.error().message);
  auto health_addr = Address("health-addr", f.health_addr);
  if (!health_addr.ok()) return Fail(health_addr.error().message);

  auto config = kube::LoadDefaultConfig(f.config);
  if (!config.ok()) return Fail(config.error().message);
  Clock& clock = SystemClock::Instance();
  metrics::Registry registry;
  auto api = kube::CurlKubeApi::FromConfig(*config, clock, {.registry = &registry});
  if (!api.ok()) return Fail(api.error().message);

  char host[256] = "operator";
  ::gethostname(host, sizeof host - 1);
  op::OperatorOptions o;
  o.settings.namespace_name = f.ns;
  o.settings.agent_service_account = f.agent_service_account;
  o.settings.agent_image = f.agent_image;
  o.settings.probe_key_secret = f.probe_key_secret;
  // The chart renders no key material: the probe key Secret is made here when missing.
  if (Status s = op::EnsureProbeKeySecret(**api, f.ns, f.probe_key_secret, op::OsRandomBytes); !s.ok()) {
    return Fail(s.error().message);
  }
  o.training_jobs.coordinator_image = f.coordinator_image;
  o.training_jobs.coordinator_cluster_role = f.coordinator_cluster_role;
  o.kubeflow_trainjobs = f.kubeflow_trainjobs;
  o.kubeflow_pytorchjobs = f.kubeflow_pytorchjobs;
  o.training_jobs.coordinator_address =
      f.coordinator_address == "pod-ip" ? op::CoordinatorAddress::kPodIp : op::CoordinatorAddress::kService;
  o.workers = f.workers;
  o.leader_elect = f.leader_elect;
  o.election = {.lease_namespace = f.ns,
                .lease_name = f.lease_name,
                .identity = !f.identity.empty() ? f.identity
                                                : Env("POD_NAME", std::string(host) + "_" + std::to_string(::getpid())),
                .lease_duration = std::chrono::seconds(f.lease_s),
                .renew_deadline = std::chrono::seconds(f.renew_s),
                .retry_period = std::chrono::seconds(f.retry_s)};
  o.registry = &registry;
  auto built = op::BuildOperator(**api, clock, o);
  if (!built.ok()) return Fail(built.error().message);
  op::Operator& op = **built;

  auto& leader_gauge = registry.Gauge("lockstep_operator_leader", "1 while this process holds the lease.");
  HttpServer metrics_server, health_server;
  metrics_server.Handle("/metrics", [&](const HttpRequest&) {
    leader_gauge.Set(op.IsLeader() ? 1 : 0);
    return HttpResponse{200, "text/plain; version=0.0.4", registry.Render()};
  });
  health_server.Handle("/healthz", [&](const HttpRequest&) {
    return op.Lost() ? HttpResponse{503, "text/plain", "leadership lost\n"} : HttpResponse{200, "text/plain", "ok\n"};
  });
  health_server.Handle("/readyz", [&](const HttpRequest&) {
    bool synced = op.Synced();
    std::string body = std::string("caches: ") + (synced ? "synced" : "syncing") +
                       "\nleader: " + (op.IsLeader() ? "yes" : "no") + "\n";
    return HttpResponse{synced ? 200 : 503, "text/plain", body};
  });
  if (Status s = metrics_server.Start(metrics_addr->first, metrics_addr->second); !s.ok()) return Fail(s.error().message);
  if (Status s = health_server.Start(health_addr->first, health_addr->second); !s.ok()) return Fail(s.error().message);
  log::Info("serving", {{"metrics_port", std::to_string(metrics_server.port())},
                        {"health_port", std::to_string(health_server.port())},
                        {"identity", o.election.identity},
                        {"namespace", f.ns}});

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // The pod admission webhook: every replica serves it (it only reads the
  // TrainingJob cache), so the Service need not follow the leader.
  std::unique_ptr<op::WebhookServer> webhook;
  if (!f.webhook_addr.empty()) {
    auto webhook_addr = Address("webhook-addr", f.webhook_addr);
    if (!webhook_addr.ok()) return Fail(webhook_addr.error().message);
    webhook = std::make_unique<op::WebhookServer>(
        op::WebhookServerOptions{.cert_file = f.webhook_cert_dir + "/tls.crt",
                                 .key_file = f.webhook_cert_dir + "/tls.key"},
        [&op, pod_ip = f.coordinator_address == "pod-ip"](const nlohmann::json& review) {
          op::CoordinatorUrlLookup lookup;
          if (pod_ip) {  // the coordinator pod's IP, from the cache of the jobs' pods
            lookup = [&op](const std::string& ns, const std::string& tj) -> std::string {
              kube::ObjectPtr pod = op.job_pods().store().Get(ns, op::CoordinatorName(tj));
              if (!pod || kube::FindPath(*pod, {"metadata", "deletionTimestamp"})) return "";
              const std::string ip = kube::GetString(*pod, {"status", "podIP"});
              return ip.empty() ? "" : op::CoordinatorPodIpUrl(ip);
            };
          }
          return op::MutatePodAdmission(review, op.trainingjobs().store(), lookup);
        });
    if (Status s = webhook->Start(webhook_addr->first, webhook_addr->second); !s.ok()) return Fail(s.error().message);
    log::Info("serving the pod admission webhook", {{"port", std::to_string(webhook->port())}});
  }
  // The read-only web page (web_page.h), from the caches; every replica serves it.
  std::unique_ptr<op::WebPage> web;
  HttpServer web_server;
  if (!f.web_addr.empty()) {
    auto web_addr = Address("web-addr", f.web_addr);
    if (!web_addr.ok()) return Fail(web_addr.error().message);
    web = std::make_unique<op::WebPage>(
        op::WebPageSources{&op.healths().store(), &op.policies().store(), &op.trainingjobs().store(),
                           &op.job_pods().store(), &op.fleet_audits().store(), &op.node_audits().store()},
        clock);
    web->Watch(op.healths(), op.trainingjobs());
    web->Register(web_server);
    if (Status s = web_server.Start(web_addr->first, web_addr->second); !s.ok()) return Fail(s.error().message);
    log::Info("serving the web page", {{"port", std::to_string(web_server.port())}});
  }
  op.Start();
  // Losing the lease ends the process: a fresh one re-syncs from scratch.
  while (g_signal == 0 && !op.Lost()) std::this_thread::sleep_for(50ms);
  log::Info(op.Lost() ? "shutting down: leadership lost" : "shutting down",
            {{"signal", std::to_string(g_signal.load())}});
  op.Stop();
  if (webhook) webhook->Stop();
  web_server.Stop();
  metrics_server.Stop();
  health_server.Stop();
  return op.Lost() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "lockstep-operator: reconciles FabricPolicy into the node agent DaemonSet and one FabricHealth per node, and "
      "runs each TrainingJob's rank pods and coordinator"};
  app.add_option("--kubeconfig", f.config.kubeconfig, "kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", f.config.context, "kubeconfig context");
  app.add_option("--server", f.config.server, "API server URL (with --token-file: a ServiceAccount token)");
  app.add_option("--token-file", f.config.token_file, "bearer token file");
  app.add_option("--certificate-authority", f.config.ca_file, "CA bundle for --server");
  app.add_option("--namespace", f.ns, "where agent objects and the lease live ($POD_NAMESPACE, else lockstep-system)");
  app.add_flag("--leader-elect", f.leader_elect, "elect a leader through a Lease (--leader-elect=false to run alone)");
  app.add_option("--leader-election-id", f.lease_name, "lease name")->default_val(f.lease_name);
  app.add_option("--lease-duration", f.lease_s, "seconds")->check(CLI::Range(1, 3600))->default_val(15);
  app.add_option("--renew-deadline", f.renew_s, "seconds")->check(CLI::Range(1, 3600))->default_val(10);
  app.add_option("--retry-period", f.retry_s, "seconds")->check(CLI::Range(1, 3600))->default_val(2);
  app.add_option("--identity", f.identity, "leader identity (default $POD_NAME or hostname_pid)");
  app.add_option("--metrics-addr", f.metrics_addr, "[HOST]:PORT for /metrics (port 0 picks one)")->default_val(":8080");
  app.add_option("--health-addr", f.health_addr, "[HOST]:PORT for /healthz and /readyz")->default_val(":8081");
  app.add_option("--agent-service-account", f.agent_service_account, "agent ServiceAccount")->default_val(f.agent_service_account);
  app.add_option("--agent-image", f.agent_image, "overrides every policy's spec.agent.image");
  app.add_option("--probe-key-secret", f.probe_key_secret, "Secret with the probe key (created with 32 random bytes when missing, never overwritten)")->default_val(f.probe_key_secret);
  app.add_option("--coordinator-image", f.coordinator_image, "image of each TrainingJob's coordinator pod")
      ->default_val(f.coordinator_image);
  app.add_option("--coordinator-cluster-role", f.coordinator_cluster_role,
                 "ClusterRole bound to each TrainingJob's coordinator ServiceAccount in the job's namespace")
      ->default_val(f.coordinator_cluster_role);
  app.add_flag("--kubeflow-trainjobs", f.kubeflow_trainjobs,
               "protect Kubeflow TrainJobs annotated lockstep.dev/fault-tolerance=enabled (watches trainjobs and "
               "jobsets: their CRDs must be installed)");
  app.add_flag("--kubeflow-pytorchjobs", f.kubeflow_pytorchjobs,
               "protect Kubeflow PyTorchJobs annotated lockstep.dev/fault-tolerance=enabled (watches pytorchjobs: "
               "the CRD must be installed)");
  app.add_option("--webhook-addr", f.webhook_addr,
                 "[HOST]:PORT of the pod admission webhook over TLS (empty: not served)");
  app.add_option("--webhook-cert-dir", f.webhook_cert_dir, "directory with the webhook's tls.crt and tls.key")
      ->default_val(f.webhook_cert_dir);
  app.add_option("--web-addr", f.web_addr,
                 "[HOST]:PORT of the read-only web page: fleet, flaps, clock, audits, jobs (empty: not served)");
  app.add_option("--coordinator-address", f.coordinator_address,
                 "how rank and spare pods reach their coordinator: service (its Service's DNS name) or pod-ip (its "
                 "pod's IP, for clusters without DNS or a Service proxy; ranks are created once it has one)")
      ->check(CLI::IsMember({"service", "pod-ip"}))
      ->default_val(f.coordinator_address);
  app.add_option("--workers", f.workers, "reconcile workers per controller")->check(CLI::Range(1, 64))->default_val(4);
  app.add_option("--log-level", f.log_level, "debug|info|warn|error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->default_val("info");
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
