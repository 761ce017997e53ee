// Every field of each CRD's schema has a member in the C++ type, and every
// member of the C++ type is a field of the schema: a fully populated object
// built from the schema survives parse -> serialize unchanged, and a fully
// populated C++ value serializes only to keys the schema declares.
#include <catch2/catch.hpp>

#include "crd_schema.h"
#include "lockstep/api/fabric_health.h"
#include "lockstep/api/fabric_policy.h"
#include "lockstep/api/training_job.h"

namespace lockstep::api {
namespace {

using testing::KeyDiff;
using testing::KeysNotInSchema;
using testing::LoadCrdSchema;
using testing::Populate;

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += "\n  " + x;
  return out;
}

// parse(json) -> ToJson must give back json, key for key and value for value.
template <typename Parse>
void RequireRoundTrip(const Json& in, Parse parse) {
  auto parsed = parse(in);
  INFO("input: " << in.dump());
  if (!parsed.ok()) FAIL(parsed.error().message);
  Json out = ToJson(*parsed);
  INFO("keys that differ:" << Join(KeyDiff(in, out)));
  REQUIRE(out == in);
}

TEST_CASE("FabricPolicy: every schema field has a member and back", "[api]") {
  const Json schema = LoadCrdSchema("lockstep.dev_fabricpolicies.yaml");
  const Json& spec_schema = schema["properties"]["spec"];
  const Json& status_schema = schema["properties"]["status"];
  RequireRoundTrip(Populate(spec_schema, ".spec"), [](const Json& j) { return ParseFabricPolicySpec("p", j); });
  RequireRoundTrip(Populate(status_schema, ".status"), [](const Json& j) { return ParseFabricPolicyStatus("p", j); });

  FabricPolicySpec spec;
  spec.node_selector.match_expressions.push_back({"zone", "In", {"a"}});
  spec.tolerations.push_back({"k", "Equal", "v", "NoExecute", 5});
  REQUIRE(Join(KeysNotInSchema(spec_schema, ToJson(spec))).empty());
  FabricPolicyStatus status{1, 2, 3, 4, "3/2", "lockstep-agent-p", {{"Ready", "True", 1, "t", "R", "m"}}};
  REQUIRE(Join(KeysNotInSchema(status_schema, ToJson(status))).empty());
  REQUIRE(ToJson(status).size() == status_schema["properties"].size());
}

TEST_CASE("FabricHealth: every schema field has a member and back", "[api]") {
  const Json schema = LoadCrdSchema("lockstep.dev_fabrichealths.yaml");
  const Json& status_schema = schema["properties"]["status"];
  RequireRoundTrip(Populate(status_schema, ".status"), [](const Json& j) { return ParseFabricHealthStatus("n", j); });

  FabricHealthStatus s;
  FabricHealthAgentStatus& a = s.agent;
  a = {"Healthy", "n", "t1", "t2", ClockStatus{"LOCKED", 1, 2, 3, 4}, 3, {"10.0.0.1:7311"}, 1, 1, 0,
       AuditStatus{"Pass", {{"mtu", "Pass", "ok"}}, "t3"}, "Pass", "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
       "10.0.200.1", "t4",
       GpuHealthStatus{"Warning", "550.54.15", 1, {{1, "GPU-1", "Warning", 93, -5, 2, 0, false, {79}}}}};
  s.op.policy = "default";
  s.conditions = {{"Ready", "True", 1, "t", "R", "m"}};
  Json j = ToJson(s);
  REQUIRE(Join(KeysNotInSchema(status_schema, j)).empty());
  REQUIRE(j.size() == status_schema["properties"].size());  // every status field is a member
  // The two writers' keys partition the status (conditions are shared by type).
  size_t owned = AgentOwnedStatusKeys().size() + OperatorOwnedStatusKeys().size() + 1;
  REQUIRE(owned == status_schema["properties"].size());
  REQUIRE(ToJson(s.agent).size() == AgentOwnedStatusKeys().size());
}

TEST_CASE("TrainingJob: every schema field has a member and back", "[api]") {
  const Json schema = LoadCrdSchema("lockstep.dev_trainingjobs.yaml");
  const Json& spec_schema = schema["properties"]["spec"];
  const Json& status_schema = schema["properties"]["status"];
  Json full = Populate(spec_schema, ".spec");
  auto parse = [](const Json& j) { return ParseTrainingJobSpec("job", j); };
  Json with_template = full;
  with_template.erase("pytorchJobRef");
  with_template.erase("trainJobRef");
  RequireRoundTrip(with_template, parse);
  Json with_ref = full;
  with_ref.erase("template");
  with_ref.erase("trainJobRef");
  RequireRoundTrip(with_ref, parse);
  Json with_train = full;
  with_train.erase("template");
  with_train.erase("pytorchJobRef");
  RequireRoundTrip(with_train, parse);
  RequireRoundTrip(Populate(status_schema, ".status"), [](const Json& j) { return ParseTrainingJobStatus("job", j); });

  TrainingJobSpec spec;
  spec.pytorch_job_ref = "pj";
  spec.train_job_ref = "tj";
  REQUIRE(Join(KeysNotInSchema(spec_schema, ToJson(spec))).empty());
  TrainingJobStatus st{"Running", 1, 2, 3, 4, 5, MigrationRecord{1, "a", "b", "Hang", "t1", "t2", 9},
                       {{"Ready", "True", 1, "t", "R", "m"}}};
  REQUIRE(Join(KeysNotInSchema(status_schema, ToJson(st))).empty());
  REQUIRE(ToJson(st).size() == status_schema["properties"].size());
  REQUIRE(ToJson(st)["lastMigration"].size() ==
          status_schema["properties"]["lastMigration"]["properties"].size());
}

TEST_CASE("the schema walker sees a field the C++ type lacks", "[api]") {
  // Guards the test above: a schema field without a member must fail it.
  Json schema = LoadCrdSchema("lockstep.dev_fabricpolicies.yaml")["properties"]["spec"];
  schema["properties"]["probe"]["properties"]["newField"] = {{"type", "integer"}};
  Json in = Populate(schema, ".spec");
  Json out = ToJson(*ParseFabricPolicySpec("p", in));
  REQUIRE(KeyDiff(in, out) == std::set<std::string>{".probe.newField (only in the first)"});
  Json bigger = ToJson(FabricPolicySpec{});
  bigger["probe"]["extra"] = 1;
  REQUIRE(KeysNotInSchema(LoadCrdSchema("lockstep.dev_fabricpolicies.yaml")["properties"]["spec"], bigger) ==
          std::set<std::string>{".probe.extra"});
}

}  // namespace
}  // namespace lockstep::api
