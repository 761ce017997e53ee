#include "lockstep/agent/keyed_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace lockstep::agent {
namespace {

// One scratch digest context per thread: Compute() stays const and thread-safe.
EVP_MD_CTX* Scratch() {
  struct Holder {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Holder() { EVP_MD_CTX_free(ctx); }
  };
  thread_local Holder holder;
  return holder.ctx;
}

}  // namespace

KeyedMac::KeyedMac(const ProbeKey& key) {
  constexpr size_t kBlock = 64;
  md_ = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  inner_ = EVP_MD_CTX_new();
  outer_ = EVP_MD_CTX_new();
  if (md_ == nullptr || inner_ == nullptr || outer_ == nullptr) std::abort();
  unsigned char k[kBlock] = {};
  if (key.bytes().size() > kBlock) {
    unsigned int len = 0;
    if (EVP_Digest(key.bytes().data(), key.bytes().size(), k, &len, md_, nullptr) != 1) std::abort();
  } else {
    std::memcpy(k, key.bytes().data(), key.bytes().size());
  }
  unsigned char ipad[kBlock], opad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<unsigned char>(k[i] ^ 0x36);
    opad[i] = static_cast<unsigned char>(k[i] ^ 0x5c);
  }
  if (EVP_DigestInit_ex(inner_, md_, nullptr) != 1 || EVP_DigestUpdate(inner_, ipad, kBlock) != 1 ||
      EVP_DigestInit_ex(outer_, md_, nullptr) != 1 || EVP_DigestUpdate(outer_, opad, kBlock) != 1) {
    std::abort();  // an OpenSSL without SHA-256: nothing sensible to do
  }
  OPENSSL_cleanse(k, sizeof k);
  OPENSSL_cleanse(ipad, sizeof ipad);
  OPENSSL_cleanse(opad, sizeof opad);
}

KeyedMac::~KeyedMac() {
  EVP_MD_CTX_free(inner_);
  EVP_MD_CTX_free(outer_);
  EVP_MD_free(md_);
}

std::optional<std::array<uint8_t, kMacSize>> KeyedMac::Compute(std::span<const uint8_t> data) const {
  EVP_MD_CTX* w = Scratch();
  unsigned char h[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (w == nullptr || EVP_MD_CTX_copy_ex(w, inner_) != 1 || EVP_DigestUpdate(w, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(w, h, &len) != 1 || EVP_MD_CTX_copy_ex(w, outer_) != 1 ||
      EVP_DigestUpdate(w, h, len) != 1 || EVP_DigestFinal_ex(w, h, &len) != 1 || len < kMacSize) {
    return std::nullopt;
  }
  std::array<uint8_t, kMacSize> out{};
  std::copy(h, h + kMacSize, out.begin());
  return out;
}

}  // namespace lockstep::agent
