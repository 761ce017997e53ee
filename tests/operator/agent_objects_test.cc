#include <yaml-cpp/yaml.h>

#include <map>

#include <catch2/catch.hpp>

#include "lockstep/operator/agent_objects.h"

namespace lockstep::op {
namespace {

TEST_CASE("the agent DaemonSet runs with only the capabilities it needs", "[operator]") {
  PolicySpec spec = *ParsePolicySpec("default", nullptr);
  OperatorSettings s;
  s.namespace_name = "ls";
  Json ds = RenderAgentDaemonSet({"default", "uid-1"}, spec, s);
  REQUIRE(ds["metadata"]["name"] == "lockstep-agent-default");
  REQUIRE(ds["metadata"]["namespace"] == "ls");
  REQUIRE(ds["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
  REQUIRE(ds["metadata"]["ownerReferences"][0]["controller"] == true);
  const Json& pod = ds["spec"]["template"]["spec"];
  REQUIRE(pod["serviceAccountName"] == "lockstep-agent");
  REQUIRE(pod["priorityClassName"] == "system-node-critical");
  REQUIRE(pod["tolerations"][0]["key"] == "nvidia.com/gpu");
  REQUIRE(pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault");
  const Json& sc = pod["containers"][0]["securityContext"];
  REQUIRE(sc["capabilities"]["drop"] == Json::array({"ALL"}));
  // Failover is on by default: NET_ADMIN for its routes, nothing else.
  REQUIRE(sc["capabilities"]["add"] == Json::array({"NET_ADMIN"}));
  REQUIRE(sc["allowPrivilegeEscalation"] == false);
  REQUIRE(sc["readOnlyRootFilesystem"] == true);
  REQUIRE_FALSE(sc.contains("privileged"));

  spec.clock_sync.discipline_host_clock = true;
  Json ds2 = RenderAgentDaemonSet({"default", "uid-1"}, spec, s);
  const Json& sc2 = ds2["spec"]["template"]["spec"]["containers"][0]["securityContext"];
  REQUIRE(sc2["capabilities"]["add"] == Json::array({"NET_ADMIN", "SYS_TIME"}));
  REQUIRE(sc2["capabilities"]["drop"] == Json::array({"ALL"}));

  spec.failover.enabled = false;
  spec.clock_sync.discipline_host_clock = false;
  Json ds3 = RenderAgentDaemonSet({"default", "uid-1"}, spec, s);
  const Json& sc3 = ds3["spec"]["template"]["spec"]["containers"][0]["securityContext"];
  REQUIRE_FALSE(sc3["capabilities"].contains("add"));  // monitoring only: no route changes, no capability
}

TEST_CASE("GPU health: the agent asks the NVIDIA runtime for NVML without taking a GPU, unless disabled",
          "[operator]") {
  PolicySpec spec = *ParsePolicySpec("default", nullptr);
  OperatorSettings s;
  auto container = [&]() -> Json {
    return RenderAgentDaemonSet({"default", "u"}, spec, s)["spec"]["template"]["spec"]["containers"][0];
  };
  auto env_of = [&] {
    std::map<std::string, Json> env;
    const Json c = container();  // kept: a range-for over container()["env"] would outlive the temporary
    for (const Json& e : c["env"]) {
      env[e["name"].get<std::string>()] = e.contains("value") ? e["value"] : e["valueFrom"];
    }
    return env;
  };
  auto env = env_of();
  REQUIRE(env.at("NVIDIA_VISIBLE_DEVICES") == "all");
  REQUIRE(env.at("NVIDIA_DRIVER_CAPABILITIES") == "utility");
  REQUIRE(env.count("NODE_NAME") == 1);
  REQUIRE(container()["resources"].dump().find("nvidia.com/gpu") == std::string::npos);  // no GPU requested
  spec.gpu.mode = api::kGpuModeDisabled;
  env = env_of();
  REQUIRE(env.count("NVIDIA_VISIBLE_DEVICES") == 0);
  REQUIRE(env.count("POD_IP") == 1);
}

const Json* Named(const Json& list, const std::string& name) {
  for (const Json& e : list) {
    if (e["name"] == name) return &e;
  }
  return nullptr;
}

TEST_CASE("the NCCL plugin: an init container fills its host directory, the agent serves the socket in another",
          "[operator]") {
  PolicySpec spec = *ParsePolicySpec("default", nullptr);
  OperatorSettings s;
  s.agent_image = "registry.local/lockstep-agent:dev";
  Json ds = RenderAgentDaemonSet({"default", "u"}, spec, s);
  const Json& pod = ds["spec"]["template"]["spec"];
  const Json& agent = pod["containers"][0];

  // Defaults: /opt/lockstep/nccl filled by install-nccl-plugin from the agent image.
  REQUIRE(pod["initContainers"].size() == 1);
  const Json& init = pod["initContainers"][0];
  REQUIRE(init["name"] == "install-nccl-plugin");
  REQUIRE(init["image"] == "registry.local/lockstep-agent:dev");  // the agent's own image
  REQUIRE(init["imagePullPolicy"] == agent["imagePullPolicy"]);
  REQUIRE_FALSE(init.contains("command"));  // the image's entrypoint, lockstep-agent
  REQUIRE(init["args"] == Json::array({"install-nccl-plugin", "--to=/host-nccl"}));
  REQUIRE(init["securityContext"]["capabilities"]["drop"] == Json::array({"ALL"}));
  REQUIRE_FALSE(init["securityContext"]["capabilities"].contains("add"));
  REQUIRE(init["securityContext"]["readOnlyRootFilesystem"] == true);
  REQUIRE(init["securityContext"]["allowPrivilegeEscalation"] == false);
  REQUIRE(init["resources"] == agent["resources"]);  // adds nothing to the pod's requests
  REQUIRE(init["volumeMounts"] == Json::parse(R"([{"name":"nccl-plugin","mountPath":"/host-nccl"}])"));
  const Json* plugin = Named(pod["volumes"], "nccl-plugin");
  REQUIRE(plugin != nullptr);
  REQUIRE((*plugin)["hostPath"] == Json::parse(R"({"path":"/opt/lockstep/nccl","type":"DirectoryOrCreate"})"));
  REQUIRE(Named(agent["volumeMounts"], "nccl-plugin") == nullptr);  // the agent itself does not write it

  // /run/lockstep: the agent's --nccl-socket default (/run/lockstep/nccl.sock) on a host directory.
  const Json* sock = Named(pod["volumes"], "nccl-socket");
  REQUIRE(sock != nullptr);
  REQUIRE((*sock)["hostPath"] == Json::parse(R"({"path":"/run/lockstep","type":"DirectoryOrCreate"})"));
  const Json* sock_mount = Named(agent["volumeMounts"], "nccl-socket");
  REQUIRE(sock_mount != nullptr);
  REQUIRE((*sock_mount)["mountPath"] == "/run/lockstep");
  REQUIRE_FALSE(sock_mount->contains("readOnly"));  // the agent creates nccl.sock there
  for (const Json& a : agent["args"]) REQUIRE(a.get<std::string>().rfind("--nccl-socket", 0) != 0);
  REQUIRE(agent["securityContext"]["readOnlyRootFilesystem"] == true);

  // Other host directories.
  spec = *ParsePolicySpec(
      "default", Json::parse(R"({"agent":{"ncclPluginHostPath":"/var/lib/nccl","ncclSocketHostPath":"/var/run/ls"}})"));
  ds = RenderAgentDaemonSet({"default", "u"}, spec, s);
  REQUIRE((*Named(ds["spec"]["template"]["spec"]["volumes"], "nccl-plugin"))["hostPath"]["path"] == "/var/lib/nccl");
  REQUIRE((*Named(ds["spec"]["template"]["spec"]["volumes"], "nccl-socket"))["hostPath"]["path"] == "/var/run/ls");
  REQUIRE((*Named(ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"], "nccl-socket"))["mountPath"] ==
          "/run/lockstep");  // the same path inside, whatever the host's

  // Both off: no init container, no hostPath, the endpoint off.
  spec = *ParsePolicySpec("default", Json::parse(R"({"agent":{"ncclPluginHostPath":"","ncclSocketHostPath":""}})"));
  ds = RenderAgentDaemonSet({"default", "u"}, spec, s);
  const Json& pod2 = ds["spec"]["template"]["spec"];
  REQUIRE_FALSE(pod2.contains("initContainers"));
  REQUIRE(pod2["volumes"].size() == 2);  // config and probe-key only
  for (const Json& v : pod2["volumes"]) REQUIRE_FALSE(v.contains("hostPath"));
  REQUIRE(pod2["containers"][0]["volumeMounts"].size() == 2);
  REQUIRE(pod2["containers"][0]["args"].back() == "--nccl-socket=");
}

TEST_CASE("NCCL host directories must be absolute paths without '.' or '..'", "[operator]") {
  for (const char* bad : {"opt/nccl", "/", "/opt/../etc", "/opt/./x", "/opt//x", "/opt/x/", "/..", "relative"}) {
    INFO(bad);
    auto r = ParsePolicySpec("p", Json{{"agent", {{"ncclPluginHostPath", bad}}}});
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().message.find("spec.agent.ncclPluginHostPath") != std::string::npos);
    REQUIRE(r.error().message.find(std::string("got \"") + bad + "\"") != std::string::npos);
    REQUIRE_FALSE(ParsePolicySpec("p", Json{{"agent", {{"ncclSocketHostPath", bad}}}}).ok());
  }
  REQUIRE_FALSE(
      ParsePolicySpec("p", Json{{"agent", {{"ncclSocketHostPath", std::string(513, 'a').insert(0, "/")}}}}).ok());
  for (const char* good : {"", "/opt/lockstep/nccl", "/a", "/var/lib/..x/.y"}) {
    INFO(good);
    auto r = ParsePolicySpec("p", Json{{"agent", {{"ncclPluginHostPath", good}, {"ncclSocketHostPath", good}}}});
    REQUIRE(r.ok());
    REQUIRE(r->agent.nccl_plugin_host_path == good);
    REQUIRE(r->agent.nccl_socket_host_path == good);
  }
}

TEST_CASE("a config change changes the pod template hash", "[operator]") {
  PolicySpec spec = *ParsePolicySpec("default", nullptr);
  OperatorSettings s;
  auto hash = [&] {
    return RenderAgentDaemonSet({"default", "u"}, spec, s)["spec"]["template"]["metadata"]["annotations"]
        ["lockstep.dev/config-hash"];
  };
  Json before = hash();
  REQUIRE(before == hash());
  spec.probe.interval_ms = 10;
  REQUIRE(before != hash());
  // A latency SLA change rolls the agents too (they read agent.yaml at start).
  Json with_probe = hash();
  spec.latency.one_way_delay_p99_micros = 500;
  REQUIRE(with_probe != hash());
  Json with_sla = hash();
  spec.latency.min_samples = 20;
  REQUIRE(with_sla != hash());
}

TEST_CASE("agent.yaml carries the policy's settings", "[operator]") {
  PolicySpec spec = *ParsePolicySpec(
      "p1", Json::parse(R"({"probe":{"intervalMs":25,"port":7400},"clockSync":{"asymmetryAllowanceNs":30}})"));
  OperatorSettings s;
  YAML::Node y = YAML::Load(RenderAgentConfig({"p1", "u"}, spec, s));
  REQUIRE(y["policy"].as<std::string>() == "p1");
  REQUIRE(y["probe"]["intervalMs"].as<int>() == 25);
  REQUIRE(y["probe"]["port"].as<int>() == 7400);
  REQUIRE(y["clockSync"]["asymmetryAllowanceNs"].as<int>() == 30);
  REQUIRE(y["clockSync"]["maxErrorBoundNs"].as<int64_t>() == spec.clock_sync.max_error_bound_ns);
  REQUIRE(y["flapAlertPerHour"].as<int>() == api::kFlapAlertPerHour);
  REQUIRE(y["failover"]["enabled"].as<bool>());
  REQUIRE(y["probe"]["missThreshold"].as<int>() == api::kMissThreshold);
  REQUIRE_FALSE(y["loadBalancing"]);
  REQUIRE(y["probeKeyFile"].as<std::string>() == api::kProbeKeyFile);
  REQUIRE_FALSE(y["latency"]["oneWayDelayP99Micros"]);  // no SLA by default
  REQUIRE(y["latency"]["minSamples"].as<int>() == api::kLatencyMinSamples);
  REQUIRE(y["latency"]["rails"].size() == 0);
  Json cm = RenderAgentConfigMap({"p1", "u"}, spec, s);
  REQUIRE(cm["data"]["agent.yaml"] == RenderAgentConfig({"p1", "u"}, spec, s));
}

}  // namespace
}  // namespace lockstep::op
