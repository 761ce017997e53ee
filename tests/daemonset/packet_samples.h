// Sample packets and a key for the codec tests.
#pragma once

#include "lockstep/agent/probe_packet.h"

namespace lockstep::agent::test {

inline ProbeKey Key() { return *ProbeKey::FromBytes("0123456789abcdef-test-key"); }

inline Packet SampleProbe() {
  ProbeBody b;
  b.pair_seq = 7;
  b.index = 1;
  b.spacing_ns = 20'000;
  b.tx_app_ns = 1'700'000'000'123'456'789;
  b.prev_valid = true;
  b.prev_pair_seq = 6;
  b.prev_tx_ns = {1'700'000'000'100'000'000, 1'700'000'000'100'020'000};
  return Packet{11, 22, 1000, b};
}

inline Packet SampleReport() {
  ReportBody r;
  r.rx.push_back({5, {111, 222}});
  r.rx.push_back({6, {333, 0}});
  r.edges.push_back({11, 22, 1'700'000'000'000'000'000, -1234.5, 3.5e-6, 900.0f, 12.5f, 1e-9f, true});
  r.models.push_back({33, 1'700'000'000'000'000'000, 2.5e6, -4.25e-5, 85.0f, 2e-10f});
  return Packet{11, 22, 1001, r};
}

}  // namespace lockstep::agent::test

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <string>
#include <vector>

namespace lockstep::agent::test {

// Full HMAC-SHA256 of `data`, to forge validly signed packets in tests.
inline std::array<uint8_t, 32> HmacForTest(const std::string& key, const std::vector<uint8_t>& data) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(), &len);
  return out;
}

}  // namespace lockstep::agent::test
