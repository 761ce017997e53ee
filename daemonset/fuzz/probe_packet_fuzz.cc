// libFuzzer target for the probe receive path (build with -DLOCKSTEP_FUZZ=ON
// and clang; see daemonset/README.md). Properties checked on every input:
//   - PacketFilter::Accept never crashes, leaks or reads out of bounds (ASan/UBSan);
//   - anything accepted re-encodes to exactly the input bytes (the codec is a
//     bijection on valid packets, so nothing unauthenticated slips through a
//     lenient parse).
// The key is fixed so the fuzzer can reach the body parser only through the
// seed corpus's validly signed packets and their truncations.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>

#include "lockstep/agent/packet_filter.h"

using namespace lockstep::agent;

namespace {
const PacketCodec& Codec() {
  static const PacketCodec codec(*ProbeKey::FromBytes("lockstep-fuzz-key-0123456789"));
  return codec;
}
}  // namespace

// With LOCKSTEP_FUZZ_SEEDS=<dir>, writes validly signed seed packets there.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("LOCKSTEP_FUZZ_SEEDS");
  if (dir == nullptr) return 0;
  ProbeBody probe;
  probe.pair_seq = 7;
  probe.index = 1;
  probe.spacing_ns = 20000;
  probe.prev_valid = true;
  probe.prev_pair_seq = 6;
  probe.prev_tx_ns = {100, 120};
  ReportBody report;
  report.rx = {{5, {111, 222}}, {6, {333, 444}}};
  report.edges = {{11, 22, 1000, -12.5, 1e-6, 900.0f, 12.5f, 1e-9f, true}};
  int i = 0;
  for (const Packet& p : {Packet{11, 22, 1, probe}, Packet{11, 22, 2, report}}) {
    auto bytes = *Codec().Encode(p);
    std::ofstream(std::string(dir) + "/seed-" + std::to_string(i++), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const PacketCodec& codec = Codec();
  PacketFilter filter(codec, /*self=*/22);
  auto out = filter.Accept(std::span<const uint8_t>(data, size));
  if (const Packet* p = std::get_if<Packet>(&out)) {
    auto again = codec.Encode(*p);
    if (!again.ok() || again->size() != size || !std::equal(again->begin(), again->end(), data)) std::abort();
  }
  return 0;
}
