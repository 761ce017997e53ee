// lockstep-coordinator: the live rank migration coordinator of one training
// job (docs/migration.md). Parses flags, builds the adapters of one mode (local:
// SIGKILL fencer, --spare-command processes, pidfd probe, state file; --kube:
// pod-deleting fencer, spare pods, pod probe, state ConfigMap), loads the
// state, serves the HTTP API and ticks until SIGTERM/SIGINT. Flags: --help.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "lockstep/common/metrics.h"
#include "lockstep/coordinator/adapters.h"
#include "lockstep/coordinator/coordinator.h"
#include "lockstep/coordinator/kube_adapters.h"
#include "lockstep/coordinator/kube_job_sync.h"
#include "lockstep/coordinator/pod_cache.h"
#include "lockstep/kube/curl_kube_api.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_config.h"
#include "lockstep/migration/decide.h"
#include "lockstep/migration/state_json.h"

namespace {

using namespace lockstep;

struct Flags {
  std::string job;
  int world_size = 0;
  std::string listen = "127.0.0.1:0";
  std::string port_file, state_file;
  std::string heartbeat_timeout = "3s", report_grace = "2s", join_timeout = "20s";
  int spares = 0;
  std::string spare_command;
  std::string fence;  // "": local, or kube with --kube
  std::string pid_check = "auto";
  std::vector<std::string> local_hosts;
  std::string tick = "100ms";
  int max_held_polls = 16;
  std::string log_level = "info";
  std::string advertise_url;
  // Kubernetes mode.
  bool kube = false;
  std::string kubeconfig, ns, spare_pod_template, state_configmap;
  std::optional<std::string> training_job;  // unset: --job; "": none
  std::string leave_grace = "30s";
  std::string pod_cache = "on";  // --kube: watch the job's pods (on) or poll them (off)
  bool keep_restarted_pods = false;
};

int Fail(const std::string& message) {
  std::cerr << "lockstep-coordinator: " << message << "\n";
  return 2;
}

// "1.5s", "500ms", "2" (seconds) -> seconds.
Result<double> Duration(const std::string& flag, const std::string& v) {
  double scale = 1;
  std::string num = v;
  if (v.size() > 2 && v.substr(v.size() - 2) == "ms") {
    scale = 1e-3;
    num = v.substr(0, v.size() - 2);
  } else if (!v.empty() && v.back() == 's') num = v.substr(0, v.size() - 1);
  char* end = nullptr;
  double d = std::strtod(num.c_str(), &end);
  if (num.empty() || *end != '\0' || !(d >= 0) || d > 86400) {
    return InvalidArgument("--" + flag + " must be a duration such as 1.5s or 500ms (got \"" + v + "\")");
  }
  return d * scale;
}

Result<std::pair<std::string, int>> Address(const std::string& v) {
  auto colon = v.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("--listen must be HOST:PORT (got \"" + v + "\")");
  std::string host = v.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(v.c_str() + colon + 1, &end, 10);
  if (colon + 1 == v.size() || *end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument("--listen: bad port in \"" + v + "\"");
  }
  return std::make_pair(host.empty() ? std::string("127.0.0.1") : host, static_cast<int>(port));
}

Status WritePortFile(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return Unavailable("cannot write --port-file " + tmp);
  std::fprintf(f, "%d\n", port);
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Unavailable("cannot rename " + tmp + " to " + path);
  return Status::Ok();
}

// The state store of --kube, which also wakes the job's status writer after
// each save (a save is a state change: a generation complete shows at once).
class WakingStore final : public coordinator::StateStore {
 public:
  explicit WakingStore(std::unique_ptr<coordinator::StateStore> inner) : inner_(std::move(inner)) {}
  void SetWake(std::function<void()> wake) {
    std::lock_guard l(mu_);
    wake_ = std::move(wake);
  }
  Status Save(const std::string& text) override {
    Status s = inner_->Save(text);
    std::lock_guard l(mu_);
    if (wake_) wake_();
    return s;
  }
  Result<std::optional<std::string>> Load() override { return inner_->Load(); }

 private:
  std::unique_ptr<coordinator::StateStore> inner_;
  std::mutex mu_;
  std::function<void()> wake_;  // GUARDED_BY(mu_)
};

// The adapters of one mode; they outlive the coordinator that uses them.
struct Wiring {
  std::unique_ptr<kube::KubeApi> api;
  std::unique_ptr<coordinator::PodCache> pods;  // --kube, --pod-cache on: the job's pods, watched
  // The KubeApi of the pod workers: the cached view, or the API itself.
  kube::KubeApi* pod_api() const { return pods ? &pods->view() : api.get(); }
  WakingStore* waking_store = nullptr;  // --kube: `store`
  // --kube: the job's status writer, woken by pod events and state saves once set.
  std::shared_ptr<std::atomic<coordinator::KubeJobSync*>> sync_to_wake;
  std::unique_ptr<coordinator::StateStore> store;
  std::unique_ptr<coordinator::Fencer> fencer;
  std::unique_ptr<coordinator::ProcessProbe> probe;
  std::unique_ptr<coordinator::ShellSpareLauncher> shell;      // local spares
  std::unique_ptr<coordinator::KubeSpareLauncher> spare_pods;  // --kube spares
  std::string where;                                           // of the state, for messages
  std::string ns;                                              // --kube: the job's namespace
  bool pid_check = true;
  coordinator::SpareLauncher* launcher() const {
    return shell ? static_cast<coordinator::SpareLauncher*>(shell.get()) : spare_pods.get();
  }
};

Result<Wiring> LocalWiring(const Flags& f, const coordinator::LocalHosts& local) {
  if (f.state_file.empty()) return InvalidArgument("--state-file is required (without --kube)");
  if (f.fence == "kube") return InvalidArgument("--fence kube needs --kube");
  Wiring w;
  w.store = std::make_unique<coordinator::FileStateStore>(f.state_file);
  w.where = "--state-file " + f.state_file;
  if (f.fence == "local") {
    w.fencer = std::make_unique<coordinator::LocalSignalFencer>(local);
  } else {
    w.fencer = std::make_unique<coordinator::NoFencer>();
  }
  w.probe = std::make_unique<coordinator::ProcProcessProbe>();
  w.pid_check = f.pid_check == "auto";
  if (!f.spare_command.empty()) w.shell = std::make_unique<coordinator::ShellSpareLauncher>(f.spare_command, "");
  return w;
}

Result<kube::Json> ReadJsonFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(flag + ": cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  kube::Json j = kube::Json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument(flag + ": " + path + " is not valid JSON");
  return j;
}

// --kube: the API server from --kubeconfig or the in-cluster ServiceAccount.
Result<Wiring> KubeWiring(const Flags& f, metrics::Registry& registry) {
  if (f.fence == "local") return InvalidArgument("--fence local does not apply with --kube (use kube or none)");
  if (!f.spare_command.empty()) return InvalidArgument("--spare-command does not apply with --kube");
  if (f.state_configmap.empty() == f.state_file.empty()) {
    return InvalidArgument("with --kube give one of --state-configmap (in the cluster) or --state-file");
  }
  auto config = f.kubeconfig.empty() ? kube::LoadInClusterConfig() : kube::LoadKubeConfigFile(f.kubeconfig);
  if (!config.ok()) return InvalidArgument("--kube: " + config.error().message + " (give --kubeconfig)");
  std::string ns = f.ns.empty() ? config->default_namespace : f.ns;
  auto api = kube::CurlKubeApi::FromConfig(*config, SystemClock::Instance(),
                                           {.request_timeout = std::chrono::seconds(10), .registry = &registry});
  if (!api.ok()) return api.error();
  Wiring w;
  w.api = std::move(*api);
  w.ns = ns;
  std::unique_ptr<coordinator::StateStore> store;
  if (!f.state_configmap.empty()) {
    store = std::make_unique<coordinator::ConfigMapStateStore>(
        *w.api, coordinator::ConfigMapStoreOptions{.ns = ns, .name = f.state_configmap, .job = f.job});
    w.where = "--state-configmap " + ns + "/" + f.state_configmap;
  } else {
    store = std::make_unique<coordinator::FileStateStore>(f.state_file);
    w.where = "--state-file " + f.state_file;
  }
  auto waking = std::make_unique<WakingStore>(std::move(store));
  w.waking_store = waking.get();
  w.store = std::move(waking);
  if (f.pod_cache == "on") w.pods = std::make_unique<coordinator::PodCache>(*w.api, ns, f.job);
  if (f.fence == "none") {
    w.fencer = std::make_unique<coordinator::NoFencer>();
  } else {
    w.fencer = std::make_unique<coordinator::KubePodFencer>(*w.api, coordinator::KubeFencerOptions{.ns = ns});
  }
  // With the cache: the job's pods (lockstep.dev/job) from it, others read one by one.
  w.probe = std::make_unique<coordinator::KubePodProbe>(
      *w.pod_api(), ns, std::chrono::milliseconds(1000),
      w.pods ? std::string(coordinator::kJobLabel) + "=" + f.job : std::string());
  w.pid_check = true;  // the pod probe; local pids mean nothing here
  if (!f.spare_pod_template.empty()) {
    auto pod = ReadJsonFile("--spare-pod-template", f.spare_pod_template);
    if (!pod.ok()) return pod.error();
    coordinator::KubeSpareOptions options{.job = f.job, .ns = ns, .pod_template = *pod};
    if (Status s = coordinator::KubeSpareLauncher::Check(options); !s.ok()) {
      return InvalidArgument("--spare-pod-template " + f.spare_pod_template + ": " + s.error().message);
    }
    w.spare_pods = std::make_unique<coordinator::KubeSpareLauncher>(*w.pod_api(), std::move(options));
  }
  w.sync_to_wake = std::make_shared<std::atomic<coordinator::KubeJobSync*>>(nullptr);
  w.waking_store->SetWake([sync = w.sync_to_wake] {
    if (auto* s = sync->load()) s->Wake();
  });
  if (w.pods) {
    auto* probe = static_cast<coordinator::KubePodProbe*>(w.probe.get());
    auto* spares = w.spare_pods.get();
    w.pods->OnChange([probe, spares, sync = w.sync_to_wake] {
      probe->Wake();
      if (spares) spares->Wake();
      if (auto* s = sync->load()) s->Wake();
    });
  }
  return w;
}

// Starts the Kubernetes adapters' worker threads (no-op locally), after the
// pod cache's first list (the spare launcher adopts the pods it finds).
void StartWorkers(Wiring& w) {
  if (w.pods) {
    w.pods->Start();
    if (!w.pods->WaitSynced(std::chrono::seconds(30))) {
      log::Warn("the job's pods are not listed after 30 s (the pod workers retry)", {});
    }
  }
  if (auto* fencer = dynamic_cast<coordinator::KubePodFencer*>(w.fencer.get())) fencer->Start();
  if (auto* probe = dynamic_cast<coordinator::KubePodProbe*>(w.probe.get())) probe->Start();
  if (w.spare_pods) w.spare_pods->Start();
}

int Run(const Flags& f) {
  // SIGTERM/SIGINT are blocked in every thread (the server's and the ticker inherit
  // the mask) and taken by sigwait at the end: no polling loop. Spares are started
  // with an empty mask (ShellSpareLauncher).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  log::SetLevel(f.log_level == "debug"   ? log::Level::kDebug
                : f.log_level == "warn"  ? log::Level::kWarn
                : f.log_level == "error" ? log::Level::kError
                                         : log::Level::kInfo);
  log::SetComponent("coordinator");
  auto addr = Address(f.listen);
  if (!addr.ok()) return Fail(addr.error().message);
  auto hb = Duration("heartbeat-timeout", f.heartbeat_timeout);
  if (!hb.ok()) return Fail(hb.error().message);
  auto grace = Duration("report-grace", f.report_grace);
  if (!grace.ok()) return Fail(grace.error().message);
  auto join = Duration("join-timeout", f.join_timeout);
  if (!join.ok()) return Fail(join.error().message);
  auto tick = Duration("tick", f.tick);
  if (!tick.ok()) return Fail(tick.error().message);
  if (*hb <= 0 || *join <= 0) return Fail("--heartbeat-timeout and --join-timeout must be > 0");
  if (*tick <= 0 || *tick > 1) return Fail("--tick must be between 1ms and 1s");
  auto leave_grace = Duration("leave-grace", f.leave_grace);
  if (!leave_grace.ok()) return Fail(leave_grace.error().message);

  migration::JobConfig config;
  config.job = f.job;
  config.world_size = f.world_size;
  config.heartbeat_timeout_s = *hb;
  config.report_grace_s = *grace;
  config.join_timeout_s = *join;
  config.spares = f.spares;
  config.can_launch_spares = f.kube ? !f.spare_pod_template.empty() : !f.spare_command.empty();
  config.spares_from_start = f.kube;  // spare pods are kept at --spares from the start
  auto fresh = migration::NewJob(config);
  if (!fresh.ok()) return Fail(fresh.error().message);

  coordinator::LocalHosts local(f.local_hosts);
  metrics::Registry registry;
  auto wired = f.kube ? KubeWiring(f, registry) : LocalWiring(f, local);
  if (!wired.ok()) return Fail(wired.error().message);
  Wiring& w = *wired;
  auto saved = w.store->Load();
  if (!saved.ok()) return Fail(saved.error().message);
  migration::JobState state = *fresh;
  bool restored = false;
  if (saved->has_value()) {
    auto loaded = migration::StateFromString(**saved);
    if (!loaded.ok()) {
      return Fail(w.where + ": " + loaded.error().message + " (move it away to start the job afresh)");
    }
    if (loaded->config.job != f.job || loaded->config.world_size != f.world_size) {
      return Fail(w.where + " belongs to job " + loaded->config.job + " with world size " +
                  std::to_string(loaded->config.world_size) + ", not " + f.job + " with " +
                  std::to_string(f.world_size));
    }
    state = std::move(*loaded);
    state.config = config;  // timeouts and spares may change across restarts
    restored = true;
  }

  coordinator::CoordinatorPorts ports;
  ports.fencer = w.fencer.get();
  ports.launcher = w.launcher();
  ports.probe = w.probe.get();
  ports.store = w.store.get();
  ports.local = &local;
  ports.registry = &registry;
  coordinator::CoordinatorOptions options;
  options.tick_interval = std::chrono::milliseconds(std::max<long>(1, static_cast<long>(*tick * 1000)));
  options.pid_check = w.pid_check;
  options.max_held_plan_polls = f.max_held_polls;
  options.keep_restarted_pods = f.keep_restarted_pods;
  options.max_plan_wait = std::chrono::milliseconds(2000);  // well inside the 5 s request timeout
  coordinator::Coordinator coord(std::move(state), restored, ports, options);
  // A restored state counts every member alive as of now (Restarted) before
  // anything can apply an event to it: the HTTP server and the workers below
  // start first, and a heartbeat served before Begin() judged the members by
  // their last_seen from before the outage (a spare joining as rank 3 was
  // declared dead by heartbeat timeout 0.2 s after a restart, e2e.train-pods-faults).
  coord.Begin();

  // Two threads serve every call; each held plan poll (a long poll, blocked on a
  // condition variable: no CPU) sits on one more.
  HttpServer server(HttpServerOptions{
      .request_timeout = std::chrono::milliseconds(5000), .max_connections = 512, .threads = 2 + f.max_held_polls});
  coord.AddHandlers(server);
  if (Status s = server.Start(addr->first, addr->second); !s.ok()) return Fail(s.error().message);
  std::string url_host = addr->first == "0.0.0.0" || addr->first == "::" ? "127.0.0.1" : addr->first;
  if (url_host.find(':') != std::string::npos) url_host = "[" + url_host + "]";
  std::string url = "http://" + url_host + ":" + std::to_string(server.port());
  if (!f.advertise_url.empty()) url = f.advertise_url;
  if (w.shell) w.shell->SetCoordinatorUrl(url);
  if (w.spare_pods) w.spare_pods->SetCoordinatorUrl(url);
  if (!f.port_file.empty()) {
    if (Status s = WritePortFile(f.port_file, server.port()); !s.ok()) {
      server.Stop();
      return Fail(s.error().message);
    }
  }
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-reply is an error value, not a death
  StartWorkers(w);
  coord.Start();
  // --kube: pod annotations to migrations, rank labels, the TrainingJob's status and Events.
  std::unique_ptr<kube::EventRecorder> events;
  std::unique_ptr<coordinator::KubeJobSync> sync;
  const std::string training_job = f.training_job.value_or(f.job);
  if (w.api) {
    events = std::make_unique<kube::EventRecorder>(
        *w.api, SystemClock::Instance(),
        kube::EventRecorderOptions{.component = "lockstep-coordinator", .registry = &registry});
    sync = std::make_unique<coordinator::KubeJobSync>(
        *w.pod_api(), coord, SystemClock::Instance(),
        coordinator::KubeJobSyncOptions{
            .job = f.job, .ns = w.ns, .training_job = training_job, .leave_grace_s = *leave_grace},
        &registry, events.get());
    // Pod events and state changes run a round at once (the 1 s poll stays as a floor).
    if (w.sync_to_wake) w.sync_to_wake->store(sync.get());
    sync->Start();
  }
  log::Info("serving", {{"job", f.job},
                        {"url", url},
                        {"world_size", std::to_string(f.world_size)},
                        {"restored", restored ? "yes" : "no"},
                        {"state", w.where},
                        {"spares", std::to_string(f.spares)},
                        {"fence", f.fence},
                        {"kube", f.kube ? "yes" : "no"}});
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {}
  log::Info("shutting down", {{"signal", std::to_string(sig)}});
  if (sync) sync->Stop();
  if (w.sync_to_wake) w.sync_to_wake->store(nullptr);
  if (w.pods) w.pods->Stop();  // no more wake-ups from pod events
  coord.Drain();               // held plan polls answer now, so that the server's threads can be joined
  server.Stop();
  coord.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "lockstep-coordinator: membership, generations, spares and migrations of one training job "
      "(docs/migration.md)"};
  app.add_option("--job", f.job, "job name")->required();
  app.add_option("--world-size", f.world_size, "number of ranks")->required()->check(CLI::Range(1, 65536));
  app.add_option("--listen", f.listen, "HOST:PORT of the HTTP API (port 0: any free port)")->capture_default_str();
  app.add_option("--port-file", f.port_file, "write the bound port here");
  app.add_option("--state-file", f.state_file,
                 "job state (JSON), written on every change, loaded at start (required without --kube)");
  app.add_option("--heartbeat-timeout", f.heartbeat_timeout, "a member silent this long is dead")
      ->capture_default_str();
  app.add_option("--report-grace", f.report_grace, "after a failure, time to report before a member is hung")
      ->capture_default_str();
  app.add_option("--join-timeout", f.join_timeout, "time for a new generation to form")->capture_default_str();
  app.add_option("--spares", f.spares, "spare pool size kept ready once a spare was used (0: cold spares)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--spare-command", f.spare_command, "starts one spare (run by /bin/sh -c)");
  app.add_option("--fence", f.fence,
                 "local: SIGKILL members on this host; kube: delete the member's pod (the default with --kube); "
                 "none: only mark them dead")
      ->check(CLI::IsMember({"local", "kube", "none"}));
  app.add_option("--pid-check", f.pid_check,
                 "auto: a local member whose pid is gone is dead at once; off (with --kube pods are checked instead)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  app.add_option("--local-host", f.local_hosts, "another name of this host (for fencing and pid checks)");
  app.add_option("--tick", f.tick, "decision tick interval")->capture_default_str();
  app.add_option("--max-held-polls", f.max_held_polls,
                 "long polls of GET /v1/plan (wait_ms) held at once, one HTTP thread each; more are answered at once")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--advertise-url", f.advertise_url,
                 "the coordinator's URL given to spares as LOCKSTEP_COORDINATOR (default: http://<listen address>)");
  app.add_flag("--kube", f.kube, "Kubernetes mode: spare pods, pod-deleting fencer, pod checks (docs/migration.md)");
  app.add_option("--kubeconfig", f.kubeconfig, "--kube: kubeconfig file (default: the in-cluster ServiceAccount)");
  app.add_option("--namespace", f.ns,
                 "--kube: namespace of the pods and the state ConfigMap (default: the in-cluster namespace, or the "
                 "kubeconfig context's, else default)");
  app.add_option("--spare-pod-template", f.spare_pod_template,
                 "--kube: a corev1 Pod (JSON) the spare pods are made from; without it no spares are started");
  app.add_option("--state-configmap", f.state_configmap,
                 "--kube: keep the job state in this ConfigMap under key state.json (instead of --state-file)");
  app.add_option("--training-job", f.training_job,
                 "--kube: the TrainingJob whose status (generation, migrations, lastMigration) and Events the "
                 "coordinator writes (default: --job; \"\": none)");
  app.add_option("--pod-cache", f.pod_cache,
                 "--kube: on: watch the job's pods (label lockstep.dev/job) and read them from that cache, no "
                 "request while nothing changes; off: list them every second")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_flag("--keep-restarted-pods", f.keep_restarted_pods,
               "--kube: the rank pods belong to a job controller (Kubeflow) that restarts a dead container in "
               "place: a rank whose container terminated or restarted is not fenced by deleting its pod (the "
               "process it runs next joins as a spare); a rank taken for hung or silent before its pod showed that is "
               "fenced only 10 s later, and not at all if its container terminated or restarted meanwhile");
  app.add_option("--leave-grace", f.leave_grace,
                 "--kube: a pod whose rank moved to a spare is deleted once it ended, or this long after (so that a "
                 "drain of its node can finish)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (f.fence.empty()) f.fence = f.kube ? "kube" : "local";
  if (!f.kube) {
    for (const auto* o : {&f.kubeconfig, &f.ns, &f.spare_pod_template, &f.state_configmap}) {
      if (!o->empty()) return Fail("--kubeconfig, --namespace, --spare-pod-template and --state-configmap need --kube");
    }
    if (f.training_job) return Fail("--training-job needs --kube");
    if (f.keep_restarted_pods) return Fail("--keep-restarted-pods needs --kube");
  }
  return Run(f);
}
