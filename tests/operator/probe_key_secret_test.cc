#include "lockstep/operator/probe_key_secret.h"

#include <catch2/catch.hpp>

#include <random>

#include "fake_kube_api.h"

namespace lockstep::op {
namespace {

using kube::FakeKubeApi;
using kube::Json;
using kube::Verb;
using kube::gvr::kSecrets;

// Deterministic "random" bytes: a seeded generator, so tests repeat exactly.
RandomBytes Seeded(uint32_t seed, int* calls = nullptr) {
  auto gen = std::make_shared<std::mt19937>(seed);
  return [gen, calls](std::size_t n) -> Result<std::string> {
    if (calls) ++*calls;
    std::string out(n, '\0');
    for (char& c : out) c = static_cast<char>((*gen)() & 0xFF);
    return out;
  };
}

RandomBytes Fixed(std::string bytes) {
  return [bytes](std::size_t) -> Result<std::string> { return bytes; };
}

std::optional<std::string> StoredKey(const FakeKubeApi& api, const std::string& ns, const std::string& name) {
  auto s = api.Peek(kSecrets, ns, name);
  if (!s || !s->contains("data") || !(*s)["data"].contains("key")) return std::nullopt;
  return (*s)["data"]["key"].get<std::string>();
}

Json UserSecret(const std::string& b64_key) {
  return {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "my-key"}}}, {"data", {{"key", b64_key}}}};
}

TEST_CASE("a missing probe key Secret is created with 32 random bytes in data.key", "[operator][probe-key]") {
  FakeKubeApi api;
  REQUIRE(EnsureProbeKeySecret(api, "ls", "lockstep-probe-key", Fixed("0123456789abcdef0123456789abcdef")).ok());
  // base64 of the 32 bytes above.
  REQUIRE(StoredKey(api, "ls", "lockstep-probe-key") == "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
  auto s = *api.Peek(kSecrets, "ls", "lockstep-probe-key");
  REQUIRE(s["type"] == "Opaque");
  REQUIRE(s["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lockstep-operator");
}

TEST_CASE("binary key bytes are stored as exact base64", "[operator][probe-key]") {
  // 32 bytes = 10 groups of 3 + 2 bytes: one "=". Bytes from 0x07 to 0xFF.
  std::string key(32, '\0');
  for (int i = 0; i < 32; ++i) key[i] = static_cast<char>(i * 8 + 7);  // 0x07, 0x0f, ..., 0xff
  FakeKubeApi api;
  REQUIRE(EnsureProbeKeySecret(api, "ls", "k", Fixed(key)).ok());
  REQUIRE(StoredKey(api, "ls", "k") == "Bw8XHycvNz9HT1dfZ293f4ePl5+nr7e/x8/X3+fv9/8=");
}

TEST_CASE("an existing probe key Secret is never overwritten", "[operator][probe-key]") {
  FakeKubeApi api;
  int draws = 0;
  REQUIRE(EnsureProbeKeySecret(api, "ls", "lockstep-probe-key", Seeded(1, &draws)).ok());
  const auto first = StoredKey(api, "ls", "lockstep-probe-key");
  REQUIRE(first);
  api.ClearCalls();
  // Restarts of the operator, or another replica, find it and leave it alone.
  for (uint32_t seed = 2; seed < 5; ++seed) {
    REQUIRE(EnsureProbeKeySecret(api, "ls", "lockstep-probe-key", Seeded(seed, &draws)).ok());
  }
  REQUIRE(StoredKey(api, "ls", "lockstep-probe-key") == first);
  REQUIRE(api.WriteCount() == 0);
  REQUIRE(draws == 1);

  // A user's own key (probeKey.existingSecret, or a rotated key) stays as well.
  REQUIRE(api.Create(kSecrets, "ls", UserSecret("dXNlci1rZXktdXNlci1rZXktdXNlci1rZXk=")).ok());
  REQUIRE(EnsureProbeKeySecret(api, "ls", "my-key", Seeded(9)).ok());
  REQUIRE(StoredKey(api, "ls", "my-key") == "dXNlci1rZXktdXNlci1rZXktdXNlci1rZXk=");
}

TEST_CASE("when another replica creates the Secret first, its key is kept", "[operator][probe-key]") {
  FakeKubeApi api;
  REQUIRE(api.Create(kSecrets, "ls", UserSecret("dGhlaXItdGhlaXItdGhlaXItdGhlaXIta2V5")).ok());
  // Our read happened before theirs was created: it said NotFound, and our create loses the race.
  api.FailNext(1, ErrorCode::kNotFound, Verb::kGet);
  REQUIRE(EnsureProbeKeySecret(api, "ls", "my-key", Seeded(3)).ok());
  REQUIRE(StoredKey(api, "ls", "my-key") == "dGhlaXItdGhlaXItdGhlaXItdGhlaXIta2V5");
}

TEST_CASE("an existing Secret without a usable data.key is reported, not replaced", "[operator][probe-key]") {
  FakeKubeApi api;
  REQUIRE(api.Create(kSecrets, "ls", {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "empty"}}}})
              .ok());
  Status s = EnsureProbeKeySecret(api, "ls", "empty", Seeded(1));
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(s.error().message, Catch::Contains("ls/empty has no data.key"));
  REQUIRE_FALSE(StoredKey(api, "ls", "empty"));

  REQUIRE(api.Create(kSecrets, "ls", {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "short"}}},
                                      {"data", {{"key", "c2hvcnQ="}}}}).ok());  // "short": 5 bytes
  s = EnsureProbeKeySecret(api, "ls", "short", Seeded(1));
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(s.error().message, Catch::Contains("holds 5 bytes; the agents need 16 to 4096"));
}

TEST_CASE("without RBAC to create it, the error says how to provide the Secret", "[operator][probe-key]") {
  FakeKubeApi api;
  api.FailNext(1, ErrorCode::kUnauthorized, Verb::kCreate, "secrets is forbidden");
  Status s = EnsureProbeKeySecret(api, "ls", "my-key", Seeded(1));
  REQUIRE(s.code() == ErrorCode::kUnauthorized);
  REQUIRE_THAT(s.error().message, Catch::Contains("ls/my-key does not exist and the operator may not create it"));
  REQUIRE_THAT(s.error().message, Catch::Contains("kubectl -n ls create secret generic my-key"));
}

TEST_CASE("API and random-source failures are errors, and nothing is written", "[operator][probe-key]") {
  FakeKubeApi api;
  api.FailNext(1, ErrorCode::kUnavailable, Verb::kGet);
  REQUIRE(EnsureProbeKeySecret(api, "ls", "k", Seeded(1)).code() == ErrorCode::kUnavailable);

  RandomBytes broken = [](std::size_t) -> Result<std::string> { return Internal("no entropy"); };
  Status s = EnsureProbeKeySecret(api, "ls", "k", broken);
  REQUIRE(s.code() == ErrorCode::kInternal);
  REQUIRE_THAT(s.error().message, Catch::Contains("no entropy"));
  REQUIRE(EnsureProbeKeySecret(api, "ls", "k", Fixed("too short")).code() == ErrorCode::kInternal);
  REQUIRE(api.WriteCount() == 0);
}

TEST_CASE("OsRandomBytes returns the bytes asked for", "[operator][probe-key]") {
  auto a = OsRandomBytes(32);
  auto b = OsRandomBytes(32);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->size() == 32);
  REQUIRE(*a != *b);  // equal with probability 2^-256
}

}  // namespace
}  // namespace lockstep::op
