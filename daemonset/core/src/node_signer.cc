#include "lockstep/agent/node_signer.h"

#include <openssl/evp.h>

#include <memory>

namespace lockstep::agent {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

}  // namespace

struct NodePublicKey::Key {
  PkeyPtr pkey;
};

namespace {

constexpr size_t kRawKeySize = 32;

std::string Base64(std::span<const uint8_t> raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), raw.data(), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::shared_ptr<const NodePublicKey::Key> Wrap(PkeyPtr pkey) {
  auto k = std::make_shared<NodePublicKey::Key>();
  k->pkey = std::move(pkey);
  return k;
}

Result<std::string> RawPublicBase64(const EVP_PKEY* pkey) {
  std::array<uint8_t, kRawKeySize> raw{};
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey, raw.data(), &len) != 1 || len != raw.size()) {
    return Internal("OpenSSL could not export an Ed25519 public key");
  }
  return Base64(raw);
}

// The public half of a key pair, as peers see it (exported and parsed back).
Result<NodePublicKey> PublicKeyOf(const EVP_PKEY* pkey) {
  auto b64 = RawPublicBase64(pkey);
  if (!b64.ok()) return b64.error();
  return NodePublicKey::FromBase64(*b64);
}

}  // namespace

Result<NodePublicKey> NodePublicKey::FromBase64(const std::string& text) {
  if (text.size() != 44) {
    return InvalidArgument("node public key must be 32 bytes of Ed25519 in base64 (44 characters), got " +
                           std::to_string(text.size()) + " characters");
  }
  std::array<uint8_t, 33> raw{};  // EVP_DecodeBlock writes 33 bytes for 44 chars (one of padding)
  if (EVP_DecodeBlock(raw.data(), reinterpret_cast<const unsigned char*>(text.data()), 44) != 33 || text[43] != '=' ||
      text[42] == '=') {
    return InvalidArgument("node public key is not valid base64 of 32 bytes");
  }
  PkeyPtr pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), kRawKeySize));
  if (pkey == nullptr) return InvalidArgument("node public key is not an Ed25519 key");
  return NodePublicKey(Wrap(std::move(pkey)), text);
}

bool NodePublicKey::Verify(std::span<const uint8_t> message, const Signature& sig) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  return ctx != nullptr && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), message.data(), message.size()) == 1;
}

Result<NodeSigner> NodeSigner::Generate() {
  PkeyPtr pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (pkey == nullptr) return Internal("OpenSSL could not generate an Ed25519 key pair");
  auto pub = PublicKeyOf(pkey.get());
  if (!pub.ok()) return pub.error();
  return NodeSigner(Wrap(std::move(pkey)), *pub);
}

Result<NodeSigner> NodeSigner::FromSeed(std::span<const uint8_t> seed) {
  if (seed.size() != kRawKeySize) {
    return InvalidArgument("node private key must be 32 bytes (an Ed25519 seed), got " + std::to_string(seed.size()));
  }
  PkeyPtr pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  if (pkey == nullptr) return InvalidArgument("OpenSSL rejected the Ed25519 private key");
  auto pub = PublicKeyOf(pkey.get());
  if (!pub.ok()) return pub.error();
  return NodeSigner(Wrap(std::move(pkey)), *pub);
}

Signature NodeSigner::Sign(std::span<const uint8_t> message) const {
  Signature sig{};
  size_t len = sig.size();
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1) {
    sig.fill(0);  // verifies against nothing
  }
  return sig;
}

}  // namespace lockstep::agent
