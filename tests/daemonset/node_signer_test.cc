// Ed25519 node signatures (NodeSigner / NodePublicKey).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lockstep/agent/node_signer.h"

namespace lockstep::agent {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST_CASE("a node's signature verifies with its published key only", "[daemonset][netsurface]") {
  auto a = NodeSigner::Generate();
  auto b = NodeSigner::Generate();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const auto msg = Bytes("model node-a t_ref=1700000000000000000 offset=12.5");
  Signature sig = a->Sign(msg);
  auto published = NodePublicKey::FromBase64(a->public_key().base64());
  REQUIRE(published.ok());
  REQUIRE(published->base64().size() == 44);
  REQUIRE(published->Verify(msg, sig));
  REQUIRE_FALSE(b->public_key().Verify(msg, sig));  // another node's key
  auto tampered = msg;
  tampered.back() ^= 1;
  REQUIRE_FALSE(published->Verify(tampered, sig));
  sig[10] ^= 1;
  REQUIRE_FALSE(published->Verify(msg, sig));
}

TEST_CASE("a node key from a 32-byte seed is stable", "[daemonset][netsurface]") {
  std::vector<uint8_t> seed(32, 7);
  auto a = NodeSigner::FromSeed(seed);
  auto again = NodeSigner::FromSeed(seed);
  REQUIRE(a.ok());
  REQUIRE(a->public_key().base64() == again->public_key().base64());
  REQUIRE_FALSE(NodeSigner::FromSeed(std::vector<uint8_t>(31, 7)).ok());
}

TEST_CASE("malformed public keys are rejected with the reason", "[daemonset][netsurface]") {
  auto short_key = NodePublicKey::FromBase64("abc");
  REQUIRE_FALSE(short_key.ok());
  REQUIRE(short_key.error().message.find("44 characters") != std::string::npos);
  REQUIRE_FALSE(NodePublicKey::FromBase64(std::string(44, '!')).ok());
  REQUIRE_FALSE(NodePublicKey::FromBase64(std::string(44, 'A')).ok());  // no padding: 33 bytes
}

}  // namespace
}  // namespace lockstep::agent
