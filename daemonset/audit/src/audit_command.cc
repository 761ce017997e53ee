#include "lockstep/agent/audit/audit_command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "lockstep/agent/net/http_get.h"
#include "lockstep/api/validation.h"

#include "lockstep/agent/audit/sysfs_collector.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/pool.h"
#include "lockstep/kube/kube_config.h"

namespace lockstep::agent::audit {

namespace la = lockstep::audit;

namespace {
constexpr char kUsage[] =
    "usage: audit [--root DIR] [--rail IF]... [--require-module M]... [--expect ID=VALUE]...\n"
    "             [--library PATH] [--no-nvml] [--json] [--node NAME] [--api-server URL]\n"
    "             [--fabric ADDR | --fabric-status FILE] [--trace] [--trace-target PEER=IP]... [--trace-ports N]\n"
    "       audit judge [--json] [--pool NAME] FILE...";

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument(path + " is not JSON");
  return j;
}

Result<nlohmann::json> FetchFabricStatus(const std::string& addr) {
  auto hp = api::ParseHostPort(addr, "--fabric");
  if (!hp.ok()) return hp.error();
  auto reply = HttpGet(hp->host, hp->port, "/fabric");
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) return Unavailable(addr + " answered HTTP " + std::to_string(reply->status));
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Unavailable(addr + " did not answer JSON");
  return j;
}

int JudgeMain(const std::vector<std::string>& args, std::string& out) {
  bool json = false;
  std::string pool;
  std::vector<la::NodeChecks> nodes;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
      continue;
    }
    if (args[i] == "--pool" && i + 1 < args.size()) {
      pool = args[++i];
      continue;
    }
    auto j = ReadJsonFile(args[i]);
    if (!j.ok()) {
      std::fprintf(stderr, "audit judge: %s\n", j.error().message.c_str());
      return 2;
    }
    auto checks = la::ChecksFromJson(j->value("checks", nlohmann::json()));
    if (!checks.ok()) {
      std::fprintf(stderr, "audit judge: %s: %s\n", args[i].c_str(), checks.error().message.c_str());
      return 2;
    }
    nodes.push_back({j->value("node", args[i]), pool, *checks});
  }
  if (nodes.empty()) {
    std::fprintf(stderr, "audit judge: no node files\n%s\n", kUsage);
    return 2;
  }
  bool failed = false;
  nlohmann::json all = nlohmann::json::array();
  for (const la::NodeVerdict& v : la::JudgePools(nodes)) {
    failed = failed || v.verdict == la::Verdict::kFail;
    if (json) {
      all.push_back(la::NodeVerdictToJson(v));
    } else {
      out += "== " + v.node + "\n" + la::FormatText(v);
    }
  }
  if (json) out += all.dump() + "\n";
  return failed ? 1 : 0;
}
}  // namespace

std::string DefaultApiServer() {
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host && *host) return host;
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string first(env);
    first = first.substr(0, first.find(':'));
    if (auto c = kube::LoadKubeConfigFile(first); c.ok()) return c->server;
  }
  return "";
}

std::vector<la::Check> RunNodeChecks(CollectOptions collect, const std::optional<gpu::NvmlOptions>& nvml,
                                     const std::vector<std::string>& required_modules,
                                     std::optional<la::NetworkFacts> network) {
  la::CheckOptions checks{.required_modules = required_modules, .rails_configured = !collect.rails.empty()};
  for (const std::string& m : required_modules) {
    if (std::find(collect.modules.begin(), collect.modules.end(), m) == collect.modules.end()) {
      collect.modules.push_back(m);
    }
  }
  std::unique_ptr<gpu::NvmlGpuSource> source;
  if (nvml) source = std::make_unique<gpu::NvmlGpuSource>(*nvml);
  la::NodeFacts facts = CollectFacts(collect, source.get());
  facts.network = std::move(network);
  return la::RunChecks(facts, checks);
}

la::NetworkFacts CollectNetwork(const nlohmann::json* fabric_status, const std::string& unavailable, bool trace,
                                const std::vector<TraceTarget>& extra_targets, RouteTracer& tracer,
                                const TraceOptions& options) {
  la::NetworkFacts n;
  if (!fabric_status) {
    n.paths_unavailable = unavailable;
    n.traces_unavailable = unavailable;
    return n;
  }
  PathsFromFabricStatus(*fabric_status, n);
  if (!trace) {
    n.traces_unavailable = "route tracing not asked for";
    return n;
  }
  std::vector<TraceTarget> targets = TargetsFromFabricStatus(*fabric_status);
  targets.insert(targets.end(), extra_targets.begin(), extra_targets.end());
  TraceRoutes(RailsFromFabricStatus(*fabric_status), targets, tracer, options, n);
  return n;
}

int AuditMain(const std::vector<std::string>& args, std::string& out) {
  if (!args.empty() && args[0] == "judge") return JudgeMain(args, out);
  CollectOptions collect;
  std::string fabric_addr, fabric_file;
  bool trace = false;
  std::vector<TraceTarget> extra_targets;
  TraceOptions trace_options;
  std::vector<std::string> required;
  la::PoolOptions pool;
  gpu::NvmlOptions nvml = gpu::NvmlOptionsFromEnv();
  bool use_nvml = true, json = false;
  std::string node;
  bool api_server_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--json") {
      json = true;
    } else if (a == "--no-nvml") {
      use_nvml = false;
    } else if (a == "--help" || a == "-h") {
      out += std::string(kUsage) + "\n";
      return 0;
    } else if (has_value && a == "--root") {
      collect.root = args[++i];
    } else if (has_value && a == "--rail") {
      collect.rails.push_back(args[++i]);
    } else if (has_value && a == "--require-module") {
      required.push_back(args[++i]);
    } else if (has_value && a == "--library") {
      nvml.library = args[++i];
    } else if (a == "--trace") {
      trace = true;
    } else if (has_value && a == "--fabric") {
      fabric_addr = args[++i];
    } else if (has_value && a == "--fabric-status") {
      fabric_file = args[++i];
    } else if (has_value && a == "--trace-ports") {
      trace_options.source_ports = std::atoi(args[++i].c_str());
      if (trace_options.source_ports < 1 || trace_options.source_ports > 64) {
        std::fprintf(stderr, "audit: --trace-ports wants 1..64\n%s\n", kUsage);
        return 2;
      }
    } else if (has_value && a == "--trace-target") {
      const std::string& e = args[++i];
      const size_t eq = e.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == e.size()) {
        std::fprintf(stderr, "audit: --trace-target wants PEER=IP (got \"%s\")\n%s\n", e.c_str(), kUsage);
        return 2;
      }
      extra_targets.push_back({e.substr(0, eq), e.substr(eq + 1)});
    } else if (has_value && a == "--api-server") {
      collect.api_server = args[++i];
      api_server_given = true;
    } else if (has_value && a == "--node") {
      node = args[++i];
    } else if (has_value && a == "--expect") {
      const std::string& e = args[++i];
      const size_t eq = e.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "audit: --expect wants ID=VALUE (got \"%s\")\n%s\n", e.c_str(), kUsage);
        return 2;
      }
      pool.expectations[""][e.substr(0, eq)] = e.substr(eq + 1);
    } else {
      std::fprintf(stderr, "audit: unknown argument %s\n%s\n", a.c_str(), kUsage);
      return 2;
    }
  }
  if (!api_server_given) collect.api_server = DefaultApiServer();
  std::optional<la::NetworkFacts> network;
  if (!fabric_addr.empty() || !fabric_file.empty()) {
    auto status = fabric_file.empty() ? FetchFabricStatus(fabric_addr) : ReadJsonFile(fabric_file);
    UdpRouteTracer tracer;
    network = CollectNetwork(status.ok() ? &*status : nullptr, status.ok() ? "" : status.error().message, trace,
                             extra_targets, tracer, trace_options);
  }
  la::NodeVerdict v = la::JudgeAlone(
      {node, "", RunNodeChecks(collect, use_nvml ? std::optional(nvml) : std::nullopt, required, network)}, pool);
  out += json ? la::NodeVerdictToJson(v).dump(2) + "\n" : la::FormatText(v);
  return v.verdict == la::Verdict::kFail ? 1 : 0;
}

int AuditMain(const std::vector<std::string>& args) {
  std::string out;
  int rc = AuditMain(args, out);
  std::fputs(out.c_str(), stdout);
  return rc;
}

}  // namespace lockstep::agent::audit
