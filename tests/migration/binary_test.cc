// The real lockstep-coordinator binary: started on port 0 (port file), driven
// over HTTP through a crash of a real child process (SIGKILL, seen by pid
// liveness), a cold spare started by --spare-command that registers itself,
// malformed bodies, SIGTERM, and a restart from the state file.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "local_http.h"

#ifndef LOCKSTEP_COORDINATOR_BIN
#error "LOCKSTEP_COORDINATOR_BIN must name the lockstep-coordinator binary"
#endif

extern char** environ;

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using lockstep::LocalHttp;
using lockstep::LocalReply;

std::pair<long, json> Call(int port, const std::string& path, const std::string& post = {}) {
  LocalReply r = LocalHttp(port, path, post);
  return {r.status, json::parse(r.body, nullptr, false)};
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& err_file = {}) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!err_file.empty()) {
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return pid;
}

// Waits for `pid` to end (up to a generous limit); returns its wait status or -1.
// Sleeps in poll() on a pidfd, which becomes readable when the process exits.
int WaitExit(pid_t pid, std::chrono::seconds limit = 30s) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  REQUIRE(fd >= 0);
  pollfd p{fd, POLLIN, 0};
  int ready = ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(limit).count()));
  ::close(fd);
  int st = 0;
  if (ready == 1 && waitpid(pid, &st, 0) == pid) return st;
  return -1;
}

// Polls `pred` until it holds (generous limit: the machine is shared).
template <typename F>
bool Eventually(F pred, std::chrono::seconds limit = 30s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Processes this test started; killed and reaped at the end, even on failure.
struct Cleanup {
  std::set<pid_t> pids;
  fs::path dir;
  ~Cleanup() {
    for (pid_t p : pids) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    if (!dir.empty()) fs::remove_all(dir);
  }
};

struct Binary {
  Cleanup& cleanup;
  fs::path dir;
  pid_t pid = 0;
  int port = 0;

  void Start(std::vector<std::string> extra = {}) {
    fs::remove(dir / "port");
    std::vector<std::string> args{LOCKSTEP_COORDINATOR_BIN, "--job", "bin-test", "--world-size", "2",
                                  "--listen", "127.0.0.1:0", "--port-file", (dir / "port").string(),
                                  "--state-file", (dir / "state.json").string(),
                                  // Generous: this test kills processes; it must not race heartbeats.
                                  "--heartbeat-timeout", "120s", "--report-grace", "120s"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid = Spawn(args, (dir / "coordinator.log").string());
    cleanup.pids.insert(pid);
    REQUIRE(Eventually([&] {
      std::ifstream f(dir / "port");
      return f && (f >> port) && port > 0;
    }));
  }
  void Stop() {
    REQUIRE(::kill(pid, SIGTERM) == 0);
    int st = WaitExit(pid);
    cleanup.pids.erase(pid);
    REQUIRE(st != -1);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
  }
  std::pair<long, json> Post(const std::string& path, const json& body) { return Call(port, path, body.dump()); }
  json State() { return Call(port, "/v1/state").second; }
  // The member's JSON in GET /v1/state (null if unknown).
  json Member(const std::string& id) {
    json st = State();
    for (const auto& m : st["members"]) if (m["id"] == id) return m;
    return nullptr;
  }
};

json Reg(const std::string& id, const char* role, int rank, pid_t pid) {
  json b{{"member", id}, {"role", role}, {"host", "127.0.0.1"}, {"store_port", 29500 + rank + 1}, {"pid", pid}};
  if (rank >= 0) b["rank"] = rank;
  return b;
}

TEST_CASE("binary: crash of a real process, a cold spare from --spare-command, restart", "[migration]") {
  Cleanup cleanup;
  char tmpl[] = "/tmp/lockstep-coord-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  cleanup.dir = tmpl;
  Binary bin{cleanup, cleanup.dir};
  // The spare registers itself with its own pid, then becomes `sleep` (same pid).
  {
    std::ofstream s(cleanup.dir / "spare.sh");
    s << "curl -s -m 5 --noproxy '*' -d \"{\\\"member\\\":\\\"cold-$$\\\",\\\"role\\\":\\\"spare\\\",\\\"host\\\":"
         "\\\"127.0.0.1\\\",\\\"store_port\\\":29600,\\\"pid\\\":$$}\" \"$LOCKSTEP_COORDINATOR/v1/register\" "
         ">/dev/null\nexec sleep 600\n";
  }
  bin.Start({"--spare-command", "/bin/sh " + (cleanup.dir / "spare.sh").string()});

  pid_t r0 = Spawn({"/bin/sleep", "600"}), r1 = Spawn({"/bin/sleep", "600"});
  cleanup.pids.insert(r0);
  cleanup.pids.insert(r1);
  REQUIRE(bin.Post("/v1/register", Reg("m0", "rank", 0, r0)).first == 200);
  REQUIRE(bin.Post("/v1/register", Reg("m1", "rank", 1, r1)).first == 200);
  // Generation 0's plan is handed out once its state was saved (the saver thread, a
  // few ms): until then the plan says wait, "generation 0 is being saved".
  auto plan = Call(bin.port, "/v1/plan?member=m1");
  for (int i = 0; i < 500 && plan.first == 200 && plan.second["action"] == "wait"; ++i) {
    CHECK(plan.second["reason"] == "generation 0 is being saved");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    plan = Call(bin.port, "/v1/plan?member=m1");
  }
  REQUIRE(plan.first == 200);
  CHECK(plan.second["action"] == "train");
  CHECK(plan.second["generation"] == 0);
  for (const char* m : {"m0", "m1"}) {
    auto hb = bin.Post("/v1/heartbeat", {{"member", m}, {"generation", 0}, {"step", 12}, {"state", "training"}});
    CHECK(hb.first == 200);
    CHECK(hb.second["directive"] == "none");
  }

  // Malformed bodies: 400 with a message; the server keeps serving.
  auto bad = Call(bin.port, "/v1/report", "{\"member\": ");
  CHECK(bad.first == 400);
  CHECK(bad.second["error"] == "report: the body is not valid JSON");
  CHECK(bin.Post("/v1/heartbeat", {{"member", "m0"}}).first == 400);
  CHECK(Call(bin.port, "/healthz").first == 200);

  // SIGKILL rank 1 (left unreaped: a zombie is dead too).
  REQUIRE(::kill(r1, SIGKILL) == 0);
  REQUIRE(Eventually([&] { return bin.Member("m1").value("status", "") == "dead"; }));
  CHECK(bin.Member("m1")["gone_cause"] == "pid_gone");
  REQUIRE(bin.Post("/v1/report", {{"member", "m0"}, {"generation", 0}, {"committed_step", 12},
                                  {"reason", "error"}, {"error", "Connection reset by peer"}})
              .first == 200);
  // No spare yet: the coordinator starts one; it registers and takes rank 1.
  json g1;
  REQUIRE(Eventually([&] {
    g1 = Call(bin.port, "/v1/plan?member=m0").second;
    return g1["action"] == "train" && g1["generation"] == 1;
  }));
  std::string spare = g1["members"][1];
  CHECK(spare.rfind("cold-", 0) == 0);
  CHECK(g1["src_rank"] == 0);
  CHECK(g1["resume_step"] == 12);
  json st = bin.State();
  pid_t spare_pid = bin.Member(spare)["pid"].get<int>();
  cleanup.pids.insert(spare_pid);  // not our child: killed at the end, reaped by the coordinator or init
  CHECK(st["history"][1]["cause"].get<std::string>().rfind("rank 1 died (member m1): process ", 0) == 0);
  CHECK(Call(bin.port, "/v1/plan?member=m1").second["action"] == "exit");
  // A late report of generation 0 is stale.
  CHECK(bin.Post("/v1/report", {{"member", "m0"}, {"generation", 0}, {"committed_step", 12}, {"reason", "error"}})
            .first == 409);
  // m0 picked up generation 1 (its heartbeat says so): the coordinator waits for its
  // report when generation 1 fails.
  CHECK(bin.Post("/v1/heartbeat", {{"member", "m0"}, {"generation", 1}, {"step", 12}, {"state", "waiting"}})
            .first == 200);
  // The spare is the coordinator's child: when it dies, the coordinator reaps it
  // and the member is dead (generation 1 fails).
  REQUIRE(::kill(spare_pid, SIGKILL) == 0);
  REQUIRE(Eventually([&] { return bin.Member(spare).value("status", "") == "dead"; }));
  cleanup.pids.erase(spare_pid);
  CHECK(bin.State()["phase"] == "collecting");
  bin.Stop();

  // Restart from the state file (no spare command now): generation 1 and its history are back.
  bin.Start();
  st = bin.State();
  CHECK(st["generation"] == 1);
  CHECK(st["phase"] == "collecting");
  CHECK(bin.Member("m1")["status"] == "dead");
  CHECK(st["history"][1]["members"][1] == spare);
  // m0 has not reported g1 yet: its plan says wait (g1 ended), its heartbeat says abort.
  CHECK(Call(bin.port, "/v1/plan?member=m0").second["action"] == "wait");
  CHECK(bin.Post("/v1/heartbeat", {{"member", "m0"}, {"generation", 1}, {"step", 12}, {"state", "waiting"}})
            .second["directive"] == "abort");
  bin.Stop();
  ::waitpid(r1, nullptr, 0);
  cleanup.pids.erase(r1);
}

TEST_CASE("binary: bad flags are refused with a message", "[migration]") {
  Cleanup cleanup;
  char tmpl[] = "/tmp/lockstep-coord-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  cleanup.dir = tmpl;
  std::string err = (cleanup.dir / "err").string();
  struct Row { std::vector<std::string> args; std::string message; };
  for (const auto& r : std::vector<Row>{
           {{"--heartbeat-timeout", "soon"}, "--heartbeat-timeout must be a duration such as 1.5s or 500ms (got \"soon\")"},
           {{"--listen", "nowhere"}, "--listen must be HOST:PORT (got \"nowhere\")"},
           {{"--fence", "maybe"}, "--fence: maybe not in {local,kube,none}"},
           {{"--fence", "kube"}, "--fence kube needs --kube"},
           {{"--state-configmap", "s"},
            "--kubeconfig, --namespace, --spare-pod-template and --state-configmap need --kube"},
           {{"--kube", "--state-configmap", "s"},
            "with --kube give one of --state-configmap (in the cluster) or --state-file"},
           {{"--kube", "--kubeconfig", "/nonexistent/kubeconfig"}, "lockstep-coordinator: --kube: "},
           {{"--kube", "--fence", "local"}, "--fence local does not apply with --kube (use kube or none)"},
       }) {
    fs::remove(err);
    std::vector<std::string> args{LOCKSTEP_COORDINATOR_BIN, "--job", "j", "--world-size", "2", "--state-file",
                                  (cleanup.dir / "s.json").string()};
    args.insert(args.end(), r.args.begin(), r.args.end());
    pid_t pid = Spawn(args, err);
    int st = WaitExit(pid);
    REQUIRE(st != -1);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) != 0);
    std::ifstream f(err);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(text.find(r.message) != std::string::npos);
  }
  // A state file of another job is refused.
  {
    std::ofstream f(cleanup.dir / "other.json");
    f << R"({"version":1,"config":{"job":"other","world_size":2},"phase":"assembling","members":[],"history":[]})";
  }
  pid_t pid = Spawn({LOCKSTEP_COORDINATOR_BIN, "--job", "j", "--world-size", "2", "--state-file",
                     (cleanup.dir / "other.json").string()},
                    err);
  int st = WaitExit(pid);
  REQUIRE(st != -1);
  CHECK(WEXITSTATUS(st) == 2);
}

}  // namespace
