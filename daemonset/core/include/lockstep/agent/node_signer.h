// Node signatures: each agent holds an Ed25519 key pair (OpenSSL 3) and signs
// what it says about its own clock (its served model and the edges it fitted),
// so a holder of the shared probe key still cannot speak for another node's
// clock: receivers verify each record against the origin node's published
// public key (FabricHealth status.nodePublicKey, or a peer's `publicKey` in
// standalone mode).
//
// NodeSigner: one node's private key. NodePublicKey: a peer's public key.
// Both are immutable after construction; Sign/Verify are const and
// thread-safe (each call uses its own OpenSSL context). Values in, values out;
// no I/O (loading a key file is the caller's).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

inline constexpr size_t kSignatureSize = 64;
using Signature = std::array<uint8_t, kSignatureSize>;

class NodePublicKey {
 public:
  // 32 raw Ed25519 bytes, base64 (44 characters). InvalidArgument otherwise.
  static Result<NodePublicKey> FromBase64(const std::string& text);
  const std::string& base64() const { return base64_; }
  bool Verify(std::span<const uint8_t> message, const Signature& sig) const;

  struct Key;  // opaque (an EVP_PKEY)

 private:
  NodePublicKey(std::shared_ptr<const Key> k, std::string b64) : key_(std::move(k)), base64_(std::move(b64)) {}
  std::shared_ptr<const Key> key_;
  std::string base64_;
};

class NodeSigner {
 public:
  // A fresh key pair from the OS's randomness.
  static Result<NodeSigner> Generate();
  // From a 32-byte Ed25519 private key (seed), e.g. a file's content.
  static Result<NodeSigner> FromSeed(std::span<const uint8_t> seed);

  const NodePublicKey& public_key() const { return public_; }
  Signature Sign(std::span<const uint8_t> message) const;

 private:
  NodeSigner(std::shared_ptr<const NodePublicKey::Key> k, NodePublicKey pub)
      : key_(std::move(k)), public_(std::move(pub)) {}
  std::shared_ptr<const NodePublicKey::Key> key_;
  NodePublicKey public_;
};

}  // namespace lockstep::agent
