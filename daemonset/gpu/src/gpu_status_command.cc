#include "lockstep/agent/gpu/gpu_status_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "lockstep/agent/gpu/gpu_health.h"
#include "lockstep/agent/gpu/gpu_json.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"

namespace lockstep::agent::gpu {

int GpuStatusMain(const std::vector<std::string>& args) {
  NvmlOptions options = NvmlOptionsFromEnv();
  bool json_always = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json_always = true;
    } else if (args[i] == "--library" && i + 1 < args.size()) {
      options.library = args[++i];
    } else if (args[i] == "--help" || args[i] == "-h") {
      std::puts("usage: gpu-status [--library PATH] [--json]");
      return 0;
    } else {
      std::fprintf(stderr, "gpu-status: unknown argument %s (usage: gpu-status [--library PATH] [--json])\n",
                   args[i].c_str());
      return 2;
    }
  }

  NvmlGpuSource source(options);
  Result<GpuSnapshot> read = source.Read();
  if (!read.ok()) {
    const std::string& why = read.error().message;
    if (json_always) {
      nlohmann::json j = {{"available", false}, {"library", options.library}, {"reason", why}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      // "no NVIDIA driver (libnvidia-ml.so.1: ...)" prints as "no NVIDIA
      // driver: libnvidia-ml.so.1: ..."; a driver NVML cannot use, as is.
      const std::string prefix = "no NVIDIA driver (";
      if (why.rfind(prefix, 0) == 0 && why.back() == ')') {
        std::printf("no NVIDIA driver: %s\n", why.substr(prefix.size(), why.size() - prefix.size() - 1).c_str());
      } else {
        std::printf("%s\n", why.c_str());
      }
    }
    return 0;
  }
  std::vector<XidEvent> xids = source.DrainXids();
  GpuHealthInput in{.gpus = read->gpus, .recent_xids = xids};
  nlohmann::json j = ToJson(*read);
  j["available"] = true;
  j["library"] = options.library;
  j["xidEvents"] = source.xid_events();
  j["xids"] = nlohmann::json::array();
  for (const XidEvent& x : xids) j["xids"].push_back(ToJson(x));
  j["verdict"] = ToJson(EvaluateGpuHealth(in, GpuHealthPolicy{}));
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace lockstep::agent::gpu
