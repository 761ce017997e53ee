// clock-truth: scores the clock-sync agents started by e2e/demo/clock-agents
// against ground truth. See kAbout and --help.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <cctype>
#include <map>
#include <regex>
#include <sstream>

#include <CLI/CLI.hpp>

#include "bench_cli.h"
#include "clocksync_http.h"
#include "clocksync_proc.h"
#include "clocksync_truth.h"

namespace lockstep::bench {
namespace {
namespace fs = std::filesystem;

const char* kAbout = R"(clock-truth: scores the clock-sync agents started by e2e/demo/clock-agents against ground truth.

Reads GET /status of every live agent (DIR/agents/agent-i.addr, DIR/pids/agent-i.pid).
Each agent runs on a simulated clock with a known offset from the machine's
clock (the base), so the truth is known: fabric time is the mean clock of the
connected agents, F(b) = b + mean_j true_offset_j(b), and an agent's true
error is its estimated offset (local - fabric) minus its true one. The
readings are taken one after another; each is carried to the same base
instant with the agents' true drifts. Prints one row per agent (--json: one
JSON document); exits 1 unless every agent is LOCKED with |true error| <= its
error bound.
)";

// key=value lines.
std::map<std::string, std::string> ReadAddrFile(const std::string& path) {
  std::map<std::string, std::string> kv;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

// The agent of pid file `pid_path` runs (its command line names dir).
bool Running(const std::string& pid_path, const std::string& dir) {
  std::string pid = ReadFile(pid_path);
  pid.erase(std::remove_if(pid.begin(), pid.end(), [](unsigned char c) { return std::isspace(c) != 0; }), pid.end());
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return false;
  return ReadFile("/proc/" + pid + "/cmdline").find(dir) != std::string::npos;
}

// time_api_addr of every live agent, by agent number.
std::vector<std::string> LiveAgents(const std::string& dir) {
  std::map<int, std::string> found;
  const std::regex name_re(R"(agent-(\d+)\.addr)");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/agents", ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, name_re)) continue;
    if (!Running(dir + "/pids/agent-" + m[1].str() + ".pid", dir)) continue;
    auto kv = ReadAddrFile(e.path().string());
    if (!kv.count("time_api_addr")) throw std::runtime_error(e.path().string() + ": no time_api_addr");
    found[std::stoi(m[1].str())] = kv["time_api_addr"];
  }
  std::vector<std::string> out;
  for (const auto& [i, addr] : found) out.push_back(addr);
  return out;
}

int Main(int argc, char** argv) {
  std::string given;
  bool json = false;
  CLI::App app{kAbout, "clock-truth"};
  app.add_option("DIR", given, "the directory e2e/demo/clock-agents made")->required();
  app.add_flag("--json", json, "one JSON document instead of the table");
  if (const auto rc = ParseArgs(app, argc, argv)) return *rc;
  std::error_code ec;
  std::string dir = fs::absolute(given, ec).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  try {
    std::vector<AgentStatus> statuses;
    for (const auto& addr : LiveAgents(dir)) {
      std::optional<std::string> body = HttpGet(addr, "/status", 5.0);
      if (!body) throw std::runtime_error("GET http://" + addr + "/status failed");
      statuses.push_back(ParseAgentStatus(nlohmann::json::parse(*body)));
    }
    if (statuses.empty()) {
      std::cerr << "no live agents in " << dir << "\n";
      return 1;
    }
    std::vector<TruthRow> rows = ScoreTruth(statuses);
    if (json) {
      std::cout << TruthJson(rows).dump(1) << "\n";
    } else {
      std::cout << TruthTable(rows);
    }
    return AllInside(rows) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "clock-truth: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
