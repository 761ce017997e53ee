#include "netlab/commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "netlab/lab.h"
#include "netlab/links.h"
#include "netlab/napi.h"
#include "netlab/parse.h"
#include "netlab/routes.h"
#include "netlab/shaping.h"
#include "netlab/shell.h"

namespace lockstep::netlab {
namespace {

// A count option; anything outside int range fails validation like 0 does.
int Count(const Args& a, const std::string& key) { return int(std::clamp(a.Int(key), -1LL, 1'000'000LL)); }

Result<std::string> LabSubnet(const Args& a, int index) {
  if (!a.Get("subnet").empty()) return ParseLabSubnet(a.Get("subnet"));
  if (77 + index > 255) return InvalidArgument("too many labs; pass --subnet");
  return "10." + std::to_string(77 + index) + ".0.0/16";
}

// Under the root lock: replaces or refuses an existing lab of that name, picks
// the lowest free index and writes topology.json, which claims the index
// before the (slow, unlocked) build so a concurrent `up` picks another.
Result<Topology> ClaimLab(const Args& a, const Params& p) {
  const std::string name = a.Get("name");
  const std::string dir = LabDir(name);
  auto lock = FileLock::Acquire(JoinPath(NetlabRoot(), ".lock"));
  if (!lock.ok()) return lock.error();
  const auto all = ListNetns();
  const bool leftovers = std::any_of(all.begin(), all.end(), [&](const auto& ns) { return IsLabNamespace(name, ns); });
  if (std::filesystem::exists(JoinPath(dir, "topology.json")) || leftovers) {
    if (!a.Flag("replace")) {
      return Error{ErrorCode::kAlreadyExists,
                   "lab " + Quoted(name) + " already exists; `netlab down --name " + name + "` or pass --replace"};
    }
    if (auto gone = Teardown(name); !gone.ok()) return gone.error();
  }
  const auto used = UsedIndexes();
  int index = 0;
  while (used.count(index)) ++index;
  const auto subnet = LabSubnet(a, index);
  if (!subnet.ok()) return subnet.error();
  Topology t = BuildTopology(name, index, *subnet, p, a.Get("layout"), dir);
  if (!a.Get("miswire").empty()) {
    if (Status s = Miswire(t, a.Get("miswire")); !s.ok()) return s.error();
  }
  t.hash_policy = int(a.Int("hash-policy"));
  t.hash_seed = a.Int("hash-seed");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  if (Status s = SaveJson(JoinPath(dir, "topology.json"), ToJson(t)); !s.ok()) return s.error();
  return t;
}

// `up --link-rate`: a tbf shaper in both directions of every host link, so
// traffic between hosts shares a real bottleneck.
Status ShapeHostLinks(const Topology& t, const std::string& rate, LabState& state) {
  const auto bps = ParseRate(rate);
  if (!bps.ok()) return bps.error();
  for (const auto& lk : t.links) {
    if (lk.kind != "host") continue;
    for (const auto& [key, end] : ShapeEnds(lk, "both")) {
      const Shaper shaper = MakeShaper(end, "tbf", *bps, DefaultBurst(*bps), "50ms");
      for (const auto& argv : ShapeArgvs(shaper)) {
        if (auto r = RunChecked(argv); !r.ok()) return r.error();
      }
      state.shapes[key] = shaper;
    }
  }
  return Status::Ok();
}

// Builds the claimed lab and writes an all-up state.json.
Status BringUp(const Topology& t, const std::string& link_rate, bool napi_threads) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = BuildLab(t); !s.ok()) return s;
  if (napi_threads) {
    if (Status s = ThreadNapi(t); !s.ok()) return s;
  }
  LabState state;
  state.napi_threads = napi_threads;
  if (!link_rate.empty()) {
    if (Status s = ShapeHostLinks(t, link_rate, state); !s.ok()) return s;
  }
  if (Status s = SaveState(t.name, state); !s.ok()) return s;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", took.count());
  const Params& p = t.params;
  Log("lab " + t.name + ": " + std::to_string(p.hosts) + " hosts x " + std::to_string(p.rails) + " rails, " +
      std::to_string(p.leaves) + " leaves, " + std::to_string(p.spines) + " spines, " + t.subnet +
      (link_rate.empty() ? "" : ", host links " + link_rate) + (napi_threads ? ", threaded NAPI" : "") + ", up in " +
      secs + "s");
  return Status::Ok();
}

// Installs (or clears) the shapers of one link under the lab lock.
Status ShapeLink(const Args& a, const Link& lk, const std::string& dir) {
  const std::string name = a.Get("name");
  auto lock = FileLock::Acquire(JoinPath(LabDir(name), ".lock"));
  if (!lock.ok()) return lock.error();
  auto lab = LoadLab(name);
  if (!lab.ok()) return lab.error();
  LabState& state = lab->state;
  for (const auto& [key, end] : ShapeEnds(lk, dir)) {
    if (a.Flag("clear")) {
      if (auto r = Run(ClearShapeArgv(end)); !r.ok()) return r.error();
      state.shapes.erase(key);
      continue;
    }
    if (a.Get("rate").empty()) return InvalidArgument("--rate is required (or --clear)");
    const auto bps = ParseRate(a.Get("rate"));
    if (!bps.ok()) return bps.error();
    int64_t burst = DefaultBurst(*bps);
    if (!a.Get("burst").empty()) {
      const auto size = ParseSize(a.Get("burst"));
      if (!size.ok()) return size.error();
      burst = static_cast<int64_t>(*size);
    }
    const Shaper shaper = MakeShaper(end, a.Get("qdisc"), *bps, burst, a.Get("latency"));
    for (const auto& argv : ShapeArgvs(shaper)) {
      if (auto r = RunChecked(argv); !r.ok()) return r.error();
    }
    state.shapes[key] = shaper;
  }
  return SaveState(name, state);
}

}  // namespace

Result<int> CmdUp(const Args& a) {
  const Params p{Count(a, "hosts"), Count(a, "rails"), Count(a, "leaves"), Count(a, "spines")};
  if (Status s = ValidateLab(a.Get("name"), p, a.Get("layout")); !s.ok()) return s.error();
  if (!a.Get("link-rate").empty()) {
    if (const auto bps = ParseRate(a.Get("link-rate")); !bps.ok()) return bps.error();
  }
  const auto topo = ClaimLab(a, p);
  if (!topo.ok()) return topo.error();
  if (Status s = BringUp(*topo, a.Get("link-rate"), a.Flag("napi-threads")); !s.ok()) {
    Log("setup failed; tearing down what was made");
    if (auto gone = Teardown(topo->name); !gone.ok()) return gone.error();
    return s.error();
  }
  std::printf("%s\n", JoinPath(topo->dir, "topology.json").c_str());
  return 0;
}

Result<int> CmdDown(const Args& a) {
  const std::string name = a.Get("name");
  if (!ValidLabName(name)) return InvalidArgument("bad --name");
  auto lock = FileLock::Acquire(JoinPath(NetlabRoot(), ".lock"));
  if (!lock.ok()) return lock.error();
  const auto gone = Teardown(name);
  if (!gone.ok()) return gone.error();
  Log("lab " + name + ": deleted " + std::to_string(gone->size()) + " namespaces");
  return 0;
}

Result<int> CmdLink(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  const auto names = ResolveLinks(lab->topo, a.Get("link"));
  if (!names.ok()) return names.error();
  if (a.Get("action") == "flap") return RunFlapTrain(a, lab->topo, lab->state, *names);
  const bool down = a.Get("action") == "down", silent = a.Flag("silent") && down;
  const std::string one_way = silent ? a.Get("one-way") : "";
  if (!a.Get("one-way").empty() && !silent) return InvalidArgument("--one-way needs --silent and down");
  const LinkChange change{
      .down = down, .silent = silent, .one_way = one_way, .delay_s = a.Float("delay-ms") / 1000, .clear_silent = true};
  ChangeTimes times;
  const auto warnings = ChangeLinks(a.Get("name"), *names, change, SetAdminWithIp, times);
  if (!warnings.ok()) return warnings.error();
  for (const auto& w : *warnings) Log("warning: " + w);
  char at[96];
  std::snprintf(at, sizeof at, " (changed at %.6f, after %.6f)", times.changed, times.asked);
  Log(Join(*names, ", ") + ": " + a.Get("action") + (silent ? " (silent" + (one_way.empty() ? "" : ", " + one_way + " only") + ")" : "") + at);
  return 0;
}

Result<int> CmdShape(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  const Link* lk = FindLink(lab->topo, a.Get("link"));
  if (lk == nullptr) return NotFound("no link " + Quoted(a.Get("link")));
  const std::string dir = ShapeDirection(a.Get("dir"));
  if (Status s = ShapeLink(a, *lk, dir); !s.ok()) return s.error();
  Log(a.Get("link") + " " + dir + ": " + (a.Flag("clear") ? "cleared" : a.Get("qdisc") + " " + a.Get("rate")));
  return 0;
}

}  // namespace lockstep::netlab
