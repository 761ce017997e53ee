// lockstep-coordinator: the live rank migration coordinator of one training
// job (docs/migration.md). Parses flags, loads the state file, builds the
// adapters (fencer, spare launcher, /proc pid probe, state file), serves the
// HTTP API and ticks until SIGTERM/SIGINT. Flags: --help.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "lockstep/common/metrics.h"
#include "lockstep/coordinator/adapters.h"
#include "lockstep/coordinator/coordinator.h"
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
  std::string fence = "local";
  std::string pid_check = "auto";
  std::vector<std::string> local_hosts;
  std::string tick = "100ms";
  int max_held_polls = 16;
  std::string log_level = "info";
};

int Fail(const std::string& message) {
  std::cerr << "lockstep-coordinator: " << message << "\n";
  return 2;
}

// "1.5s", "500ms", "2" (seconds) -> seconds.
Result<double> Duration(const std::string& flag, const std::string& v) {
  double scale = 1;
  std::string num = v;
  if (v.size() > 2 && v.substr(v.size() - 2) == "ms") { scale = 1e-3; num = v.substr(0, v.size() - 2); }
  else if (!v.empty() && v.back() == 's') num = v.substr(0, v.size() - 1);
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

int Run(const Flags& f) {
  // SIGTERM/SIGINT are blocked in every thread (the server's and the ticker inherit
  // the mask) and taken by sigwait at the end: no polling loop. Spares are started
  // with an empty mask (ShellSpareLauncher).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  log::SetLevel(f.log_level == "debug"  ? log::Level::kDebug
                : f.log_level == "warn" ? log::Level::kWarn
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

  migration::JobConfig config;
  config.job = f.job;
  config.world_size = f.world_size;
  config.heartbeat_timeout_s = *hb;
  config.report_grace_s = *grace;
  config.join_timeout_s = *join;
  config.spares = f.spares;
  config.can_launch_spares = !f.spare_command.empty();
  auto fresh = migration::NewJob(config);
  if (!fresh.ok()) return Fail(fresh.error().message);

  coordinator::FileStateStore store(f.state_file);
  auto saved = store.Load();
  if (!saved.ok()) return Fail(saved.error().message);
  migration::JobState state = *fresh;
  bool restored = false;
  if (saved->has_value()) {
    auto loaded = migration::StateFromString(**saved);
    if (!loaded.ok()) {
      return Fail("--state-file " + f.state_file + ": " + loaded.error().message +
                  " (move it away to start the job afresh)");
    }
    if (loaded->config.job != f.job || loaded->config.world_size != f.world_size) {
      return Fail("--state-file " + f.state_file + " belongs to job " + loaded->config.job + " with world size " +
                  std::to_string(loaded->config.world_size) + ", not " + f.job + " with " +
                  std::to_string(f.world_size));
    }
    state = std::move(*loaded);
    state.config = config;  // timeouts and spares may change across restarts
    restored = true;
  }

  coordinator::LocalHosts local(f.local_hosts);
  coordinator::LocalSignalFencer signal_fencer(local);
  coordinator::NoFencer no_fencer;
  coordinator::ShellSpareLauncher launcher(f.spare_command, "");
  coordinator::ProcProcessProbe probe;
  metrics::Registry registry;
  coordinator::CoordinatorPorts ports;
  ports.fencer = f.fence == "local" ? static_cast<coordinator::Fencer*>(&signal_fencer) : &no_fencer;
  ports.launcher = f.spare_command.empty() ? nullptr : &launcher;
  ports.probe = &probe;
  ports.store = &store;
  ports.local = &local;
  ports.registry = &registry;
  coordinator::CoordinatorOptions options;
  options.tick_interval = std::chrono::milliseconds(std::max<long>(1, static_cast<long>(*tick * 1000)));
  options.pid_check = f.pid_check == "auto";
  options.max_held_plan_polls = f.max_held_polls;
  options.max_plan_wait = std::chrono::milliseconds(2000);  // well inside the 5 s request timeout
  coordinator::Coordinator coord(std::move(state), restored, ports, options);

  // Two threads serve every call; each held plan poll (a long poll, blocked on a
  // condition variable: no CPU) sits on one more.
  HttpServer server(HttpServerOptions{.request_timeout = std::chrono::milliseconds(5000), .max_connections = 512,
                                      .threads = 2 + f.max_held_polls});
  coord.AddHandlers(server);
  if (Status s = server.Start(addr->first, addr->second); !s.ok()) return Fail(s.error().message);
  std::string url_host = addr->first == "0.0.0.0" || addr->first == "::" ? "127.0.0.1" : addr->first;
  if (url_host.find(':') != std::string::npos) url_host = "[" + url_host + "]";
  std::string url = "http://" + url_host + ":" + std::to_string(server.port());
  launcher.SetCoordinatorUrl(url);
  if (!f.port_file.empty()) {
    if (Status s = WritePortFile(f.port_file, server.port()); !s.ok()) {
      server.Stop();
      return Fail(s.error().message);
    }
  }
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-reply is an error value, not a death
  coord.Start();
  log::Info("serving", {{"job", f.job}, {"url", url}, {"world_size", std::to_string(f.world_size)},
                        {"restored", restored ? "yes" : "no"}, {"state_file", f.state_file},
                        {"spares", std::to_string(f.spares)}, {"fence", f.fence}});
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  log::Info("shutting down", {{"signal", std::to_string(sig)}});
  coord.Drain();  // held plan polls answer now, so that the server's threads can be joined
  server.Stop();
  coord.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"lockstep-coordinator: membership, generations, spares and migrations of one training job "
               "(docs/migration.md)"};
  app.add_option("--job", f.job, "job name")->required();
  app.add_option("--world-size", f.world_size, "number of ranks")->required()->check(CLI::Range(1, 65536));
  app.add_option("--listen", f.listen, "HOST:PORT of the HTTP API (port 0: any free port)")->capture_default_str();
  app.add_option("--port-file", f.port_file, "write the bound port here");
  app.add_option("--state-file", f.state_file, "job state (JSON), written on every change, loaded at start")
      ->required();
  app.add_option("--heartbeat-timeout", f.heartbeat_timeout, "a member silent this long is dead")
      ->capture_default_str();
  app.add_option("--report-grace", f.report_grace, "after a failure, time to report before a member is hung")
      ->capture_default_str();
  app.add_option("--join-timeout", f.join_timeout, "time for a new generation to form")->capture_default_str();
  app.add_option("--spares", f.spares, "spare pool size kept ready once a spare was used (0: cold spares)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--spare-command", f.spare_command, "starts one spare (run by /bin/sh -c)");
  app.add_option("--fence", f.fence, "local: SIGKILL members on this host; none: only mark them dead")
      ->check(CLI::IsMember({"local", "none"}))
      ->capture_default_str();
  app.add_option("--pid-check", f.pid_check, "auto: a local member whose pid is gone is dead at once; off")
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
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
