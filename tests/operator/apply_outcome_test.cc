#include <catch2/catch.hpp>

#include "lockstep/operator/apply_outcome.h"

namespace lockstep::op {
namespace {

TEST_CASE("LiveCovers: live objects carry what we apply, plus server defaults", "[operator]") {
  Json desired = {{"spec", {{"containers", {{{"name", "a"}, {"image", "x"}}}}, {"tolerations", Json::array()},
                            {"priorityClassName", ""}}}};
  Json live = {{"spec", {{"containers", {{{"name", "a"}, {"image", "x"}, {"terminationMessagePath", "/dev/t"}}}},
                         {"schedulerName", "default"}}},
               {"status", {{"numberReady", 1}}}};
  CHECK(LiveCovers(live, desired));
  Json edited = live;
  edited["spec"]["containers"][0]["image"] = "y";
  CHECK_FALSE(LiveCovers(edited, desired));
  Json removed = live;
  removed["spec"]["containers"][0].erase("image");
  CHECK_FALSE(LiveCovers(removed, desired));
  Json fewer = live;
  fewer["spec"]["containers"] = Json::array();
  CHECK_FALSE(LiveCovers(fewer, desired));
  Json appended = live;  // an element another manager appended is theirs
  appended["spec"]["containers"].push_back({{"name", "sidecar"}});
  CHECK(LiveCovers(appended, desired));
}

TEST_CASE("a 422 names the FabricPolicy field", "[operator]") {
  const std::string m =
      "apply daemonsets: HTTP 422 Invalid: DaemonSet.apps \"lockstep-agent-p\" is invalid: "
      "spec.template.spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535";
  CHECK(InvalidFieldPath(m) == "spec.template.spec.containers[0].ports[1].containerPort");
  CHECK(PolicyFieldForAgentPath("DaemonSet", InvalidFieldPath(m)) == "spec.probe.port");
  CHECK(InvalidFieldPath("x is invalid: [spec.template.spec.tolerations[0].effect: Unsupported value, b: c]") ==
        "spec.template.spec.tolerations[0].effect");
  CHECK(PolicyFieldForAgentPath("DaemonSet", "spec.template.spec.tolerations[0].effect") == "spec.tolerations");
  CHECK(PolicyFieldForAgentPath("DaemonSet", "spec.template.spec.affinity.nodeAffinity") == "spec.nodeSelector");
  CHECK(PolicyFieldForAgentPath("ConfigMap", "metadata.name") == "metadata.name");
  CHECK(PolicyFieldForAgentPath("DaemonSet", "spec.minReadySeconds").empty());
  CHECK(InvalidFieldPath("connection refused").empty());
  std::string d = DescribeRejectedApply("DaemonSet", "ls/lockstep-agent-p", m);
  CHECK(d.rfind("spec.probe.port: ", 0) == 0);
  CHECK(d.find("spec.template.spec.containers[0].ports[1].containerPort") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::op
