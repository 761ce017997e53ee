#include "lockstep/agent/audit/audit_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "lockstep/agent/audit/sysfs_collector.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/pool.h"

namespace lockstep::agent::audit {

namespace la = lockstep::audit;

namespace {
constexpr char kUsage[] =
    "usage: audit [--root DIR] [--rail IF]... [--require-module M]... [--expect ID=VALUE]...\n"
    "             [--library PATH] [--no-nvml] [--json] [--node NAME]";
}  // namespace

std::vector<la::Check> RunNodeChecks(CollectOptions collect, const std::optional<gpu::NvmlOptions>& nvml,
                                     const std::vector<std::string>& required_modules) {
  la::CheckOptions checks{.required_modules = required_modules, .rails_configured = !collect.rails.empty()};
  for (const std::string& m : required_modules) {
    if (std::find(collect.modules.begin(), collect.modules.end(), m) == collect.modules.end()) {
      collect.modules.push_back(m);
    }
  }
  std::unique_ptr<gpu::NvmlGpuSource> source;
  if (nvml) source = std::make_unique<gpu::NvmlGpuSource>(*nvml);
  return la::RunChecks(CollectFacts(collect, source.get()), checks);
}

int AuditMain(const std::vector<std::string>& args, std::string& out) {
  CollectOptions collect;
  std::vector<std::string> required;
  la::PoolOptions pool;
  gpu::NvmlOptions nvml = gpu::NvmlOptionsFromEnv();
  bool use_nvml = true, json = false;
  std::string node;
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
  la::NodeVerdict v =
      la::JudgeAlone({node, "", RunNodeChecks(collect, use_nvml ? std::optional(nvml) : std::nullopt, required)}, pool);
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
