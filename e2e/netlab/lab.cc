#include "netlab/lab.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "netlab/parse.h"
#include "netlab/routes.h"
#include "netlab/shell.h"

namespace lockstep::netlab {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// The file's JSON; an error if it cannot be read or parsed.
Result<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Internal("cannot read " + path);
  std::stringstream text;
  text << f.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  return j;
}

// Sends SIGTERM to every process, waits up to 2 s for them to exit, then
// SIGKILLs the rest (a process left in a namespace keeps it alive).
void KillAll(std::set<int> pids) {
  for (int pid : pids) ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!pids.empty() && Clock::now() < deadline) {
    std::erase_if(pids, [](int pid) { return !fs::exists("/proc/" + std::to_string(pid)); });
    if (!pids.empty()) SleepSeconds(0.05);
  }
  for (int pid : pids) ::kill(pid, SIGKILL);
}

std::vector<std::string> LabNamespaces(const std::string& name) {
  std::vector<std::string> mine;
  for (const auto& ns : ListNetns()) {
    if (IsLabNamespace(name, ns)) mine.push_back(ns);
  }
  return mine;
}

}  // namespace

std::string NetlabRoot() {
  const char* root = std::getenv("NETLAB_ROOT");
  return root != nullptr ? root : "/run/netlab";
}

std::string JoinPath(const std::string& dir, const std::string& file) {
  if (dir.empty() || dir.back() == '/') return dir + file;
  return dir + "/" + file;
}

std::string LabDir(const std::string& name) { return JoinPath(NetlabRoot(), name); }

Result<FileLock> FileLock::Acquire(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) return Internal("open " + path + ": " + std::strerror(errno));
  FileLock lock(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return Internal("flock " + path + ": " + std::strerror(errno));
  }
  return lock;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

Result<Lab> LoadLab(const std::string& name) {
  const std::string d = LabDir(name);
  const std::string topo_path = JoinPath(d, "topology.json");
  if (!fs::exists(topo_path)) {
    return NotFound("no lab named " + Quoted(name) + " (no " + topo_path + "); run `netlab up --name " + name + "`");
  }
  const auto tj = ReadJson(topo_path);
  if (!tj.ok()) return tj.error();
  auto topo = TopologyFromJson(*tj);
  if (!topo.ok()) return topo.error();
  const std::string state_path = JoinPath(d, "state.json");
  if (!fs::exists(state_path)) return Lab{std::move(*topo), {}};
  const auto sj = ReadJson(state_path);
  if (!sj.ok()) return sj.error();
  auto state = StateFromJson(*sj);
  if (!state.ok()) return state.error();
  return Lab{std::move(*topo), std::move(*state)};
}

Status SaveJson(const std::string& path, const nlohmann::ordered_json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << j.dump(2, ' ', /*ensure_ascii=*/true) << "\n";
    if (!f.flush()) return Internal("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

Status SaveState(const std::string& name, const LabState& s) {
  return SaveJson(JoinPath(LabDir(name), "state.json"), ToJson(s));
}

std::map<int, std::string> UsedIndexes() {
  std::map<int, std::string> used;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(NetlabRoot(), ec)) {
    const auto j = ReadJson((entry.path() / "topology.json").string());
    if (j.ok() && j->is_object() && j->contains("index") && (*j)["index"].is_number_integer()) {
      used[(*j)["index"].get<int>()] = entry.path().filename().string();
    }
  }
  return used;
}

Status BuildLab(const Topology& t) {
  if (auto r = IpBatch("", NetnsAddCommands(t), true); !r.ok()) return r.error();
  for (const auto& h : t.hosts) {
    if (Status s = SetSysctls(h.ns, HostSysctls()); !s.ok()) return s;
  }
  const Sysctls router = RouterSysctls(t, KernelHasSysctl("net.ipv4.fib_multipath_hash_seed"));
  std::vector<std::string> routers;
  for (const auto& l : t.leaves) routers.push_back(l.ns);
  for (const auto& s : t.spines) routers.push_back(s.ns);
  for (const auto& ns : routers) {
    if (Status s = SetSysctls(ns, router); !s.ok()) return s;
  }
  if (auto r = IpBatch("", VethCommands(t), true); !r.ok()) return r.error();
  // Kernels built without the dummy driver still have ifb: an interface that
  // holds the host address just as well (local delivery does not use it).
  const std::string host_if_kind =
      t.hosts.empty() || KernelHasLinkKind(t.hosts[0].ns, "dummy") ? "dummy" : "ifb";
  for (const auto& c : AddressCommands(t, host_if_kind)) {
    if (auto r = IpBatch(c.ns, c.apply, true); !r.ok()) return r.error();
  }
  std::vector<std::string> links;
  for (const auto& lk : t.links) links.push_back(lk.name);
  if (Status s = WaitCarrier(t, links); !s.ok()) return s;
  auto converged = Converge(t, LabState{}, /*strict=*/true);
  return converged.ok() ? Status::Ok() : Status(converged.error());
}

Status WaitCarrier(const Topology& t, const std::vector<std::string>& links) {
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  std::vector<std::string> pending = links;
  while (!pending.empty()) {
    std::map<std::string, std::map<std::string, bool>> carriers;  // namespace -> interface -> carrier
    const auto has_carrier = [&](const Endpoint& e) {
      if (!carriers.count(e.ns)) carriers[e.ns] = Carriers(e.ns);
      return carriers[e.ns][e.ifname];
    };
    std::erase_if(pending, [&](const std::string& name) {
      const Link* lk = FindLink(t, name);
      return lk == nullptr || (has_carrier(lk->a) && has_carrier(lk->b));
    });
    if (pending.empty()) break;
    if (Clock::now() > deadline) return Internal("no carrier on " + Join(pending, ", "));
    SleepSeconds(0.02);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Converge(const Topology& t, const LabState& s, bool strict) {
  // Every namespace's routes at once (they are independent), then every
  // namespace's cleanup: one `ip` per namespace after another took most of a
  // `link` call (~340 ms under load).
  const std::vector<NsCommands> commands = ConvergeCommands(t, s);
  std::vector<NsBatch> apply, cleanup;
  for (const auto& c : commands) {
    apply.push_back({c.ns, c.apply});
    cleanup.push_back({c.ns, c.cleanup});
  }
  const auto errs = IpBatches(apply, false);
  if (!errs.ok()) return errs.error();
  std::vector<std::string> warnings;
  for (size_t i = 0; i < commands.size(); ++i) {
    const auto& e = (*errs)[i];
    if (e.empty()) continue;
    const std::vector<std::string> first(e.begin(), e.begin() + long(std::min<size_t>(e.size(), 4)));
    const std::string msg = commands[i].ns + ": " + Join(first, "; ");
    if (strict) return Internal("route setup failed in " + msg);
    warnings.push_back(msg);
  }
  // Deleting what is already gone is fine; only a command that cannot run matters.
  if (auto r = IpBatches(cleanup, false); !r.ok()) return r.error();
  return warnings;
}

Result<std::vector<std::string>> Teardown(const std::string& name) {
  const std::vector<std::string> mine = LabNamespaces(name);
  std::set<int> pids;
  for (const auto& ns : mine) {
    for (int pid : NetnsPids(ns)) pids.insert(pid);
  }
  KillAll(pids);
  if (!mine.empty()) {
    std::vector<std::string> del;
    for (const auto& ns : mine) del.push_back("netns del " + ns);
    if (auto r = IpBatch("", del, false); !r.ok()) return r.error();
  }
  std::vector<std::string> left;
  for (const auto& ns : ListNetns()) {
    if (std::find(mine.begin(), mine.end(), ns) != mine.end()) left.push_back(ns);
  }
  std::error_code ec;
  fs::remove_all(LabDir(name), ec);
  if (!left.empty()) return Internal("could not delete namespaces: " + Join(left, ", "));
  return mine;
}

}  // namespace lockstep::netlab
