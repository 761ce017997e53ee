// lockstep-operator: reconciles FabricPolicy into the node agent DaemonSet and
// keeps one FabricHealth per selected node. Flags: see Usage().
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/curl_kube_api.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/kube_config.h"
#include "lockstep/kube/leader_elector.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/fabrichealth_reconciler.h"
#include "lockstep/operator/fabricpolicy_reconciler.h"
#include "lockstep/operator/probe_key_secret.h"

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

const char* kUsage = R"(usage: lockstep-operator [flags]
  --kubeconfig=PATH            kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)
  --context=NAME               kubeconfig context
  --server=URL --token-file=PATH [--certificate-authority=PATH]
                               connect with a ServiceAccount token instead
  --namespace=NS               where agent objects and the lease live ($POD_NAMESPACE, else lockstep-system)
  --leader-elect=true|false    (default true)
  --leader-election-id=NAME    lease name (default lockstep-operator)
  --lease-duration=S --renew-deadline=S --retry-period=S   (default 15 / 10 / 2)
  --identity=ID                leader identity (default $POD_NAME or hostname_pid)
  --metrics-addr=[HOST]:PORT   Prometheus /metrics (default :8080; port 0 picks one)
  --health-addr=[HOST]:PORT    /healthz and /readyz (default :8081)
  --agent-service-account=NAME (default lockstep-agent)
  --agent-image=IMAGE          overrides every policy's spec.agent.image
  --probe-key-secret=NAME      Secret with the probe authentication key (default lockstep-probe-key);
                               created with 32 random bytes when missing, never overwritten
  --workers=N                  reconcile workers per controller (default 4)
  --log-level=debug|info|warn|error
)";

struct Flags {
  std::map<std::string, std::string> values;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
};

Result<Flags> ParseFlags(int argc, char** argv) {
  static const std::set<std::string> kKnown = {
      "kubeconfig", "context", "server", "token-file", "certificate-authority", "namespace", "leader-elect",
      "leader-election-id", "lease-duration", "renew-deadline", "retry-period", "identity", "metrics-addr",
      "health-addr", "agent-service-account", "agent-image", "probe-key-secret", "workers", "log-level"};
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return InvalidArgument("help");
    if (a.rfind("--", 0) != 0) return InvalidArgument("unexpected argument \"" + a + "\"");
    a = a.substr(2);
    std::string key = a, value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      key = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      value = argv[++i];
    } else {
      value = "true";
    }
    if (!kKnown.count(key)) return InvalidArgument("unknown flag --" + key);
    f.values[key] = value;
  }
  return f;
}

Result<int> IntFlag(const Flags& f, const std::string& key, int def, int lo, int hi) {
  std::string v = f.Get(key);
  if (v.empty()) return def;
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    return InvalidArgument("--" + key + " must be an integer between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + " (got \"" + v + "\")");
  }
  return static_cast<int>(x);
}

// "[host]:port" -> {host, port}; an empty host means all interfaces.
Result<std::pair<std::string, int>> Address(const std::string& flag, const std::string& v) {
  auto colon = v.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("--" + flag + " must be [HOST]:PORT (got \"" + v + "\")");
  std::string host = v.substr(0, colon);
  int port = std::atoi(v.substr(colon + 1).c_str());
  if (port < 0 || port > 65535) return InvalidArgument("--" + flag + ": bad port in \"" + v + "\"");
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, port);
}

std::string Env(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

int Run(const Flags& flags) {
  std::string level = flags.Get("log-level", "info");
  log::SetLevel(level == "debug" ? log::Level::kDebug : level == "warn" ? log::Level::kWarn
                : level == "error" ? log::Level::kError : log::Level::kInfo);
  log::SetComponent("operator");

  auto lease_s = IntFlag(flags, "lease-duration", 15, 1, 3600);
  auto renew_s = IntFlag(flags, "renew-deadline", 10, 1, 3600);
  auto retry_s = IntFlag(flags, "retry-period", 2, 1, 3600);
  auto workers = IntFlag(flags, "workers", 4, 1, 64);
  auto metrics_addr = Address("metrics-addr", flags.Get("metrics-addr", ":8080"));
  auto health_addr = Address("health-addr", flags.Get("health-addr", ":8081"));
  for (const Status& s : {Status::FromResult(lease_s), Status::FromResult(renew_s), Status::FromResult(retry_s),
                          Status::FromResult(workers), Status::FromResult(metrics_addr),
                          Status::FromResult(health_addr)}) {
    if (!s.ok()) {
      std::cerr << "lockstep-operator: " << s.error().message << "\n";
      return 2;
    }
  }
  if (!(*retry_s < *renew_s && *renew_s < *lease_s)) {
    std::cerr << "lockstep-operator: need --retry-period < --renew-deadline < --lease-duration\n";
    return 2;
  }

  kube::ConfigFlags cf{.kubeconfig = flags.Get("kubeconfig"), .context = flags.Get("context"),
                       .server = flags.Get("server"), .token_file = flags.Get("token-file"),
                       .ca_file = flags.Get("certificate-authority")};
  auto config = kube::LoadDefaultConfig(cf);
  if (!config.ok()) {
    std::cerr << "lockstep-operator: " << config.error().message << "\n";
    return 2;
  }
  Clock& clock = SystemClock::Instance();
  metrics::Registry registry;
  auto api_or = kube::CurlKubeApi::FromConfig(*config, clock, {.registry = &registry});
  if (!api_or.ok()) {
    std::cerr << "lockstep-operator: " << api_or.error().message << "\n";
    return 2;
  }
  kube::CurlKubeApi& api = **api_or;

  op::OperatorSettings settings;
  settings.namespace_name = flags.Get("namespace", Env("POD_NAMESPACE", "lockstep-system"));
  settings.agent_service_account = flags.Get("agent-service-account", "lockstep-agent");
  settings.agent_image = flags.Get("agent-image");
  settings.probe_key_secret = flags.Get("probe-key-secret", "lockstep-probe-key");
  // The chart renders no key material: the probe key Secret is made here when missing.
  if (Status s = op::EnsureProbeKeySecret(api, settings.namespace_name, settings.probe_key_secret, op::OsRandomBytes);
      !s.ok()) {
    std::cerr << "lockstep-operator: " << s.error().message << "\n";
    return 1;
  }

  // Informers. Watches end every 30 min and resume from the last resourceVersion.
  kube::InformerOptions all{.watch_timeout_seconds = 1800};
  kube::InformerOptions owned{.ns = settings.namespace_name,
                              .label_selector = "app.kubernetes.io/managed-by=lockstep-operator",
                              .watch_timeout_seconds = 1800};
  kube::Informer policies(api, kube::gvr::kFabricPolicies, all);
  kube::Informer nodes(api, kube::gvr::kNodes, all);
  kube::Informer healths(api, kube::gvr::kFabricHealths, all);
  kube::Informer daemonsets(api, kube::gvr::kDaemonSets, owned);
  kube::Informer configmaps(api, kube::gvr::kConfigMaps, owned);

  kube::EventRecorder events(api, clock, {.component = "lockstep-operator", .registry = &registry});
  op::FabricPolicyReconciler policy_reconciler(
      api, {policies.store(), nodes.store(), daemonsets.store(), configmaps.store()}, events, clock, settings);
  op::FabricHealthReconciler health_reconciler(api, {policies.store(), nodes.store(), healths.store()}, clock);

  // Leader election gates every reconcile; losing the lease ends the process.
  const bool leader_elect = flags.Get("leader-elect", "true") != "false";
  char host[256] = "operator";
  ::gethostname(host, sizeof host - 1);
  std::string identity = flags.Get("identity", Env("POD_NAME", std::string(host) + "_" + std::to_string(::getpid())));
  std::atomic<bool> lost{false};
  std::unique_ptr<kube::LeaderElector> elector;
  if (leader_elect) {
    elector = std::make_unique<kube::LeaderElector>(
        api, clock,
        kube::LeaderElectionConfig{.lease_namespace = settings.namespace_name,
                                   .lease_name = flags.Get("leader-election-id", "lockstep-operator"),
                                   .identity = identity,
                                   .lease_duration = std::chrono::seconds(*lease_s),
                                   .renew_deadline = std::chrono::seconds(*renew_s),
                                   .retry_period = std::chrono::seconds(*retry_s)},
        kube::LeaderCallbacks{
            .on_started_leading = [&] { log::Info("became leader", {{"identity", identity}}); },
            .on_stopped_leading =
                [&](bool was_lost) {
                  if (was_lost) {
                    log::Error("lost leadership; exiting", {{"identity", identity}});
                    lost = true;
                  }
                },
            .on_new_leader = [&](const std::string& h) { log::Info("observed leader", {{"holder", h}}); }});
  }
  auto is_leader = [&] { return !elector || elector->IsLeader(); };
  auto& leader_gauge = registry.Gauge("lockstep_operator_leader", "1 while this process holds the lease.");

  kube::Controller policy_ctl(policy_reconciler, clock,
                              {.name = "fabricpolicy", .workers = *workers, .registry = &registry, .gate = is_leader});
  policy_ctl.For(policies);
  policy_ctl.Owns(daemonsets, kube::gvr::kFabricPolicies);
  policy_ctl.Owns(configmaps, kube::gvr::kFabricPolicies);
  // Both controllers read only a node's labels (and whether it is going away):
  // status heartbeats are filtered out before they reach a queue.
  policy_ctl.Watches(nodes, [&](const kube::Json&) { return policies.store().Keys(); }, kube::LabelsOrDeletionChanged);
  policy_ctl.Watches(healths, [](const kube::Json& h) {  // conflicts show up on healths
    std::string p = kube::GetString(h, {"metadata", "labels", "lockstep.dev/policy"});
    return p.empty() ? std::vector<std::string>{} : std::vector<std::string>{p};
  });

  kube::Controller health_ctl(health_reconciler, clock,
                              {.name = "fabrichealth", .workers = *workers, .registry = &registry, .gate = is_leader});
  health_ctl.For(nodes, kube::LabelsOrDeletionChanged);
  health_ctl.For(healths);
  // Every node's plan depends on every policy's selector, not on policy status
  // (which changes as agents roll out: without the filter, each status write
  // would queue every node ahead of the new ones).
  health_ctl.Watches(
      policies,
      [&](const kube::Json&) {
        std::vector<std::string> keys = nodes.store().Keys();
        for (auto& k : healths.store().Keys()) keys.push_back(k);
        return keys;
      },
      kube::GenerationOrDeletionChanged);

  // Endpoints.
  HttpServer metrics_server, health_server;
  metrics_server.Handle("/metrics", [&](const HttpRequest&) {
    leader_gauge.Set(is_leader() ? 1 : 0);
    return HttpResponse{200, "text/plain; version=0.0.4", registry.Render()};
  });
  health_server.Handle("/healthz", [&](const HttpRequest&) {
    return lost ? HttpResponse{503, "text/plain", "leadership lost\n"} : HttpResponse{200, "text/plain", "ok\n"};
  });
  health_server.Handle("/readyz", [&](const HttpRequest&) {
    bool synced = policy_ctl.Synced() && health_ctl.Synced();
    std::string body = std::string("caches: ") + (synced ? "synced" : "syncing") +
                       "\nleader: " + (is_leader() ? "yes" : "no") + "\n";
    return HttpResponse{synced ? 200 : 503, "text/plain", body};
  });
  for (auto* srv : {&metrics_server, &health_server}) {
    const auto& addr = srv == &metrics_server ? *metrics_addr : *health_addr;
    if (Status s = srv->Start(addr.first, addr.second); !s.ok()) {
      std::cerr << "lockstep-operator: " << s.error().message << "\n";
      return 2;
    }
  }
  log::Info("serving", {{"metrics_port", std::to_string(metrics_server.port())},
                        {"health_port", std::to_string(health_server.port())},
                        {"identity", identity},
                        {"namespace", settings.namespace_name}});

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  for (auto* inf : {&policies, &nodes, &healths, &daemonsets, &configmaps}) inf->Start();
  policy_ctl.Start();
  health_ctl.Start();
  if (elector) elector->Start();

  while (g_signal == 0 && !lost) std::this_thread::sleep_for(50ms);

  log::Info(lost ? "shutting down: leadership lost" : "shutting down", {{"signal", std::to_string(g_signal.load())}});
  policy_ctl.Stop();
  health_ctl.Stop();
  if (elector) elector->Stop();  // releases the lease so a successor starts at once
  for (auto* inf : {&policies, &nodes, &healths, &daemonsets, &configmaps}) inf->Stop();
  metrics_server.Stop();
  health_server.Stop();
  return lost ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    if (flags.error().message != "help") std::cerr << "lockstep-operator: " << flags.error().message << "\n";
    std::cerr << kUsage;
    return flags.error().message == "help" ? 0 : 2;
  }
  return Run(*flags);
}
