// The testbed's fabric and agents: locating the tools, netlab up/down, agent
// configs and processes, polling until LOCKED.
#include "clocksync_testbed.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace lockstep::bench {
namespace fs = std::filesystem;

namespace {

constexpr int kTimePort = 9611, kHealthPort = 9610, kProbePort = 7311;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool IsExecutable(const std::string& path) {
  struct stat st{};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The repository: $LOCKSTEP_SOURCE_DIR, the source dir this binary was built
// from, or the current directory.
std::string RepoRoot() {
  std::vector<std::string> cands = {Env("LOCKSTEP_SOURCE_DIR"), LOCKSTEP_SOURCE_DIR, fs::current_path().string()};
  for (const auto& c : cands) {
    if (!c.empty() && fs::exists(fs::path(c) / "e2e" / "bench")) return c;
  }
  return "";
}

// Build dirs to search, first match wins: $LOCKSTEP_BUILD_DIR, the build dir
// this binary lives in (<build>/e2e/bench/clocksync), build/dev, build/ci.
std::vector<std::string> BuildDirs(const std::string& root) {
  std::vector<std::string> dirs = {Env("LOCKSTEP_BUILD_DIR")};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path().parent_path().parent_path().string());
  if (!root.empty()) {
    dirs.push_back(root + "/build/dev");
    dirs.push_back(root + "/build/ci");
  }
  dirs.erase(std::remove(dirs.begin(), dirs.end(), std::string()), dirs.end());
  return dirs;
}

std::string FindBinary(const std::vector<std::string>& dirs, const std::string& rel, const char* env) {
  if (!Env(env).empty()) return Env(env);
  for (const auto& d : dirs) {
    if (IsExecutable(d + "/" + rel)) return d + "/" + rel;
  }
  return "";
}

std::string LastLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

std::string Tail(const std::string& s, size_t n) { return s.size() > n ? s.substr(s.size() - n) : s; }

std::string Num(double v) {  // 10 -> "10", 0.5 -> "0.5"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string Tools::Loadgen() const {
  std::string path = FindBinary(BuildDirs(RepoRoot()), "e2e/netlab/netlab-loadgen", "NETLAB_LOADGEN");
  if (path.empty()) {
    Die("cannot find e2e/netlab/netlab-loadgen (build it: cmake --build --preset dev --target netlab-loadgen; "
        "or set NETLAB_LOADGEN / LOCKSTEP_BUILD_DIR)");
  }
  return path;
}

// An executable on PATH, or in /usr/sbin and /usr/bin (root's PATH may lack sbin).
std::string FindOnPath(const std::string& name) {
  std::string path = Env("PATH");
  path += ":/usr/sbin:/usr/bin:/sbin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(start, colon - start);
    if (!dir.empty() && IsExecutable(dir + "/" + name)) return dir + "/" + name;
    start = colon + 1;
  }
  return "";
}

Tools LocateTools(bool chrony) {
  Tools t;
  std::string root = RepoRoot();
  std::vector<std::string> dirs = BuildDirs(root);
  t.agent = FindBinary(dirs, "daemonset/lockstep-agent", "LOCKSTEP_AGENT");
  if (t.agent.empty()) {
    Die("cannot find daemonset/lockstep-agent (build it: cmake --build --preset dev --target lockstep-agent "
        "netlab-loadgen; or set LOCKSTEP_AGENT / LOCKSTEP_BUILD_DIR)");
  }
  // netlab: $NETLAB, a built one, else the repository's script.
  t.netlab = FindBinary(dirs, "e2e/netlab/netlab", "NETLAB");
  if (t.netlab.empty() && IsExecutable(root + "/e2e/netlab/netlab")) t.netlab = root + "/e2e/netlab/netlab";
  if (t.netlab.empty()) Die("cannot find netlab (set NETLAB, build it, or run from the repository)");
  if (chrony) {
    t.chronyd = Env("CHRONYD").empty() ? FindOnPath("chronyd") : Env("CHRONYD");
    t.chronyc = Env("CHRONYC").empty() ? FindOnPath("chronyc") : Env("CHRONYC");
    if (t.chronyd.empty() || t.chronyc.empty()) {
      Die("cannot find chronyd and chronyc (apt-get install chrony, set CHRONYD / CHRONYC, or run with --no-chrony)");
    }
  }
  return t;
}

Testbed::Testbed(const Options& opts, Tools tools) : a_(opts), tools_(std::move(tools)), rng_(opts.seed) {
  work_ = a_.work_dir;
  if (work_.empty()) {
    char tmpl[] = "/tmp/clocksync-testbed-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
    work_ = tmpl;
  }
  std::error_code ec;
  fs::create_directories(work_, ec);
  if (ec) Die("cannot create " + work_ + ": " + ec.message());
}

Testbed::~Testbed() { Teardown(); }

void Testbed::Up() {
  std::vector<std::string> argv = {tools_.netlab, "up", "--name", a_.name, "--hosts", std::to_string(a_.hosts)};
  // --fabric probes every rail: ask for netlab's default of 2 explicitly.
  if (a_.fabric) argv.insert(argv.end(), {"--rails", "2"});
  argv.push_back("--replace");
  std::string cmd;
  for (size_t k = 1; k + 1 < argv.size(); ++k) cmd += (cmd.empty() ? "" : " ") + argv[k];
  Log("netlab " + cmd);
  lab_up_ = true;  // a half-built lab is torn down too
  RunResult p = RunCapture(argv);
  if (p.rc != 0) Die("netlab up failed: " + p.err);
  std::string topo_path = LastLine(p.out);  // netlab up prints the topology.json path last
  try {
    topo_ = nlohmann::json::parse(ReadFile(topo_path));
    for (const auto& h : topo_.at("hosts")) {
      host_names_.push_back(h.at("name").get<std::string>());
      ns_.push_back(h.at("ns").get<std::string>());
      ip0_.push_back(h.at("rails").at(0).at("ip").get<std::string>());
      host_addr_.push_back(h.value("addr", ""));
      std::vector<std::string> rails;
      for (const auto& r : h.at("rails")) rails.push_back(r.at("if").get<std::string>());
      rails_.push_back(std::move(rails));
    }
  } catch (const nlohmann::json::exception& e) {
    Die("netlab up: cannot read the topology \"" + topo_path + "\": " + e.what());
  }
  if (static_cast<int>(host_names_.size()) != a_.hosts) Die("netlab up: topology has the wrong number of hosts");
  if (a_.fabric) {
    for (size_t i = 0; i < host_names_.size(); ++i) {
      if (host_addr_[i].empty()) Die("netlab up: host " + host_names_[i] + " has no host address (--fabric needs one)");
      if (rails_[i].size() < 2) Die("netlab up: host " + host_names_[i] + " has fewer than 2 rails (--fabric)");
    }
  }
}

std::string Testbed::NetlabCmd(const std::vector<std::string>& args, bool check) {
  std::vector<std::string> argv = {tools_.netlab};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult p = RunCapture(argv);
  if (check && p.rc != 0) {
    std::string cmd;
    for (const auto& x : args) cmd += (cmd.empty() ? "" : " ") + x;
    Die("netlab " + cmd + " failed: " + p.err);
  }
  return p.out;
}

void Testbed::Teardown() {
  for (auto& c : aux_) c.Signal(SIGTERM);
  for (auto& [i, c] : agents_) c.Signal(SIGTERM);
  for (auto& [i, c] : chronyds_) c.Signal(SIGTERM);
  double deadline = Now() + 3;
  auto wait = [&](Child& c) {
    if (!c.WaitFor(std::max(0.1, deadline - Now()))) {
      c.Signal(SIGKILL);
      c.WaitFor(5);
    }
  };
  for (auto& [i, c] : agents_) wait(c);
  for (auto& [i, c] : chronyds_) wait(c);
  for (auto& c : aux_) wait(c);
  netns_.Close();
  if (lab_up_) {
    RunCapture({tools_.netlab, "down", "--name", a_.name});
    lab_up_ = false;
  }
}

void Testbed::WriteConfigs() {
  std::string key_path = work_ + "/probe-key";
  std::string key(32, '\0');  // a fresh random probe key shared by every agent
  std::ifstream rnd("/dev/urandom", std::ios::binary);
  rnd.read(key.data(), static_cast<std::streamsize>(key.size()));
  if (!rnd) Die("cannot read /dev/urandom");
  WriteFile(key_path, key);
  ::chmod(key_path.c_str(), 0600);
  for (size_t i = 0; i < host_names_.size(); ++i) {
    std::string peers;
    for (size_t j = 0; j < host_names_.size(); ++j) {
      if (j == i) continue;
      peers += "  - name: " + host_names_[j] + "\n    address: " + ip0_[j] + "\n";
      // --fabric: where its path probes and the failover pins for it go.
      if (a_.fabric) peers += "    hostAddress: " + host_addr_[j] + "\n";
    }
    // --fabric: path probing over every rail, as in production (the
    // fabric prober's own port, fabric.port, keeps its default).
    std::string fabric;
    if (a_.fabric) {
      std::string rails;
      for (const auto& r : rails_[i]) rails += (rails.empty() ? "" : ", ") + r;
      fabric = "fabric:\n  rails: [" + rails + "]\n  hostAddress: " + host_addr_[i] + "\n";
    }
    std::string cfg = "nodeName: " + host_names_[i] + "\n" + "probe:\n  port: " + std::to_string(kProbePort) +
                      "\n  intervalMs: " + std::to_string(a_.interval_ms) +
                      "\n  peersPerNode: " + std::to_string(a_.peers_per_node) + "\n" +
                      "clockSync:\n  windowSeconds: 2\n  asymmetryAllowanceNs: " +
                      Num(a_.asymmetry_allowance_ns) + "\n" + "probeKeyFile: " + key_path + "\n" +
                      "healthAddr: 127.0.0.1:" + std::to_string(kHealthPort) +
                      "\ntimeApiAddr: 127.0.0.1:" + std::to_string(kTimePort) + "\n" + fabric + "peers:\n" + peers;
    WriteFile(work_ + "/agent-" + host_names_[i] + ".yaml", cfg);
    // Offset <= +-100 ms, drift <= +-50 ppm: the draws of the Python testbed.
    int64_t off = rng_.RandInt(-100'000'000, 100'000'000);
    int64_t dr = rng_.RandInt(-50'000, 50'000);
    int64_t sd = rng_.RandInt(1, int64_t{1} << 31);
    vclock_.push_back("offset_ns=" + std::to_string(off) + ",drift_ppb=" + std::to_string(dr) +
                      ",wander=" + Num(a_.wander) + ",seed=" + std::to_string(sd));
  }
}

void Testbed::StartAgent(int i) {
  auto k = static_cast<size_t>(i);
  const std::string& name = host_names_[k];
  // `ip netns exec` execs the agent, so the pid is the agent's.
  std::vector<std::string> cmd = {"ip", "netns", "exec", ns_[k], tools_.agent,
                                  "--config", work_ + "/agent-" + name + ".yaml",
                                  "--node-name", name, "--bind-address", ip0_[k],
                                  "--probe-port", std::to_string(kProbePort),
                                  "--health-addr", "127.0.0.1:" + std::to_string(kHealthPort),
                                  "--time-api-addr", "127.0.0.1:" + std::to_string(kTimePort),
                                  "--virtual-clock", vclock_[k]};
  // With --fabric the clock-sync socket stays on rail 0's address; the
  // fabric prober binds the host address, where its probes are addressed
  // (FabricBindAddress).
  agents_[i] = Child::Spawn(cmd, work_ + "/agent-" + name + ".log");
  started_[i] = Now();
}

bool Testbed::AgentAlive(int i) {
  auto it = agents_.find(i);
  return it != agents_.end() && it->second.Alive();
}

void Testbed::CheckAlive(const std::vector<int>& idx) {
  for (int i : idx) {
    if (AgentAlive(i)) continue;
    std::string log = ReadFile(work_ + "/agent-" + HostName(i) + ".log");
    Die("agent " + HostName(i) + " exited with " + std::to_string(agents_[i].ExitCode()) + ":\n" + Tail(log, 1500));
  }
}

std::map<int, std::optional<nlohmann::json>> Testbed::StatusAll(const std::vector<int>& idx) {
  std::vector<std::string> namespaces;
  for (int i : idx) namespaces.push_back(ns_[static_cast<size_t>(i)]);
  auto bodies = GetMany(netns_, namespaces, "/status", kTimePort);
  std::map<int, std::optional<nlohmann::json>> out;
  for (int i : idx) {
    const auto& body = bodies[ns_[static_cast<size_t>(i)]];
    out[i] = std::nullopt;
    if (!body) continue;
    nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out[i] = std::move(j);
  }
  return out;
}

std::map<int, double> Testbed::WaitLocked(const std::vector<int>& idx, double timeout_s) {
  std::map<int, double> locked;  // host index -> seconds from its start to LOCKED
  double deadline = Now() + timeout_s;
  while (Now() < deadline) {
    CheckAlive(idx);
    std::vector<int> pending;
    for (int i : idx) {
      if (!locked.count(i)) pending.push_back(i);
    }
    auto st = StatusAll(pending);
    double now = Now();
    if (a_.chrony) NoteChronyFirstSync();  // chrony's first sync, timed like the agents' LOCKED
    for (const auto& [i, s] : st) {
      if (s && s->value("state", "") == "LOCKED") locked[i] = now - started_[i];
    }
    if (locked.size() == idx.size()) return locked;
    Sleep(0.1);
  }
  return locked;
}

FabricPaths Testbed::FabricAll(const std::vector<int>& idx) {
  std::vector<std::string> namespaces;
  for (int i : idx) namespaces.push_back(ns_[static_cast<size_t>(i)]);
  auto bodies = GetMany(netns_, namespaces, "/fabric", kTimePort);
  FabricPaths out;
  for (int i : idx) {
    const auto& body = bodies[ns_[static_cast<size_t>(i)]];
    if (!body) continue;
    nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("paths") || !j["paths"].is_array()) continue;
    ++out.agents;
    for (const auto& p : j["paths"]) {
      if (!p.is_object()) continue;
      ++out.paths;
      std::string state = p.value("state", "");
      if (state == "up" || state == "suspect" || state == "recovering") ++out.delivering;
      if (state == "up") {
        ++out.up;
      } else {
        out.not_up.push_back(HostName(i) + "->" + p.value("peer", "?") + " " + p.value("interface", "?") + ": " +
                             state);
      }
    }
  }
  return out;
}

int Testbed::FabricDownsLogged(const std::vector<int>& idx, double wall_t0, double wall_t1) {
  int downs = 0;
  for (int i : idx) {
    std::ifstream log(work_ + "/agent-" + HostName(i) + ".log");
    std::string line;
    while (std::getline(log, line)) {
      if (line.find("fabric path state changed") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || j.value("to", "") != "down") continue;
      double ts = j.value("ts", 0.0);
      if (ts >= wall_t0 && ts <= wall_t1) ++downs;
    }
  }
  return downs;
}

// Until every agent's every fabric path delivers (up, or suspect or
// recovering: a path that flapped on this busy machine can be held down for
// a while, its probes acked); Die after timeout_s.
void Testbed::WaitFabricUp(const std::vector<int>& idx, double timeout_s) {
  const double t0 = Now(), deadline = t0 + timeout_s;
  // Every agent probes every other host on every rail (at least).
  int expected = 0;
  for (int i : idx) expected += (a_.hosts - 1) * static_cast<int>(rails_[static_cast<size_t>(i)].size());
  FabricPaths f;
  while (true) {
    CheckAlive(idx);
    f = FabricAll(idx);
    if (f.agents == static_cast<int>(idx.size()) && f.paths >= expected && f.delivering == f.paths) break;
    if (Now() >= deadline) {
      std::string some;
      for (size_t k = 0; k < f.not_up.size() && k < 8; ++k) some += (some.empty() ? "" : ", ") + f.not_up[k];
      Die("fabric paths not all delivering after " + Num(timeout_s) + " s: " + std::to_string(f.agents) + "/" +
          std::to_string(idx.size()) + " agents answered GET /fabric, " + std::to_string(f.delivering) + "/" +
          std::to_string(f.paths) + " paths up, suspect or recovering (expected >= " + std::to_string(expected) +
          ")" +
          (some.empty() ? "" : ": " + some) + " (logs in " + work_ + ")");
    }
    Sleep(0.2);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", Now() - t0);
  Log("fabric probing: every path delivers (" + std::to_string(f.paths) + " paths over " +
      std::to_string(f.agents) + " agents, " + std::to_string(f.up) + " up), " + buf +
      " s after every agent was LOCKED");
}

}  // namespace lockstep::bench
