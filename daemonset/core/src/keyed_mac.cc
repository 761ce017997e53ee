// The low-level SHA-256 interface is deprecated in OpenSSL 3 in favour of
// EVP, but EVP cannot restart from a saved state without allocating:
// EVP_MD_CTX_copy_ex frees and re-creates the provider's context (a malloc,
// a free and reference counting per copy, two copies per MAC). A
// SHA256_CTX is a plain struct: copying it is a memcpy. Same assembly
// (SHA-NI/AVX2) underneath.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "keyed_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace lockstep::agent {

struct KeyedMac::States {
  SHA256_CTX inner;  // after absorbing key ^ ipad
  SHA256_CTX outer;  // after absorbing key ^ opad
};

KeyedMac::KeyedMac(const ProbeKey& key) : states_(std::make_unique<States>()) {
  constexpr size_t kBlock = SHA256_CBLOCK;
  unsigned char k[kBlock] = {};
  if (key.bytes().size() > kBlock) {
    unsigned int len = 0;
    if (EVP_Digest(key.bytes().data(), key.bytes().size(), k, &len, EVP_sha256(), nullptr) != 1) std::abort();
  } else {
    std::memcpy(k, key.bytes().data(), key.bytes().size());
  }
  unsigned char ipad[kBlock], opad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<unsigned char>(k[i] ^ 0x36);
    opad[i] = static_cast<unsigned char>(k[i] ^ 0x5c);
  }
  if (SHA256_Init(&states_->inner) != 1 || SHA256_Update(&states_->inner, ipad, kBlock) != 1 ||
      SHA256_Init(&states_->outer) != 1 || SHA256_Update(&states_->outer, opad, kBlock) != 1) {
    std::abort();  // an OpenSSL without SHA-256: nothing sensible to do
  }
  OPENSSL_cleanse(k, sizeof k);
  OPENSSL_cleanse(ipad, sizeof ipad);
  OPENSSL_cleanse(opad, sizeof opad);
}

KeyedMac::~KeyedMac() { OPENSSL_cleanse(states_.get(), sizeof(States)); }

std::optional<std::array<uint8_t, kMacSize>> KeyedMac::Compute(std::span<const uint8_t> data) const {
  // Copies of the keyed states on the stack: Compute stays const and thread-safe.
  SHA256_CTX w = states_->inner;
  unsigned char h[SHA256_DIGEST_LENGTH];
  bool ok = SHA256_Update(&w, data.data(), data.size()) == 1 && SHA256_Final(h, &w) == 1;
  w = states_->outer;
  ok = ok && SHA256_Update(&w, h, sizeof h) == 1 && SHA256_Final(h, &w) == 1;
  // Not cleansed: OPENSSL_cleanse is a byte loop (1.5% of the prober's
  // samples), and the EVP scratch contexts it replaces kept the same state.
  if (!ok) return std::nullopt;
  static_assert(kMacSize <= SHA256_DIGEST_LENGTH);
  std::array<uint8_t, kMacSize> out{};
  std::copy(h, h + kMacSize, out.begin());
  return out;
}

}  // namespace lockstep::agent
