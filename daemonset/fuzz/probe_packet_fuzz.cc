// libFuzzer target for the probe receive path, body included (see
// daemonset/README.md; `cmake --preset fuzz`, `ctest --preset fuzz`).
//
// Each input is a packet WITHOUT its MAC: the target signs it with the shared
// key before handing it over, so mutated headers and bodies authenticate and the
// fuzzer explores the body parser and everything downstream of it, not just the
// MAC check. The first input byte picks what is fixed up before signing (bit 0:
// the body-length field; bit 1: magic and version), so both well-formed and
// inconsistent framing are reached.
//
// Downstream: the signed datagram goes through a ClockSyncService (the same
// code the agent runs) on a fake transport and fake clocks: PacketFilter
// (destination, known senders, acceptance window, replay), PairJoiner and the
// ClockModel's gossip tables; every 32nd input advances time past a window, so
// the estimator solves over whatever got in. Checked on every input:
//   - no crash, leak, out-of-bounds access or undefined behaviour (ASan/UBSan);
//   - anything the codec accepts re-encodes to exactly the same bytes (the
//     codec is a bijection on valid packets: nothing slips through a lenient
//     parse).
// Plain C++; the service is rebuilt every 4096 inputs so its state stays small.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/packet_filter.h"

using namespace lockstep;
using namespace lockstep::agent;

namespace {

constexpr char kKey[] = "lockstep-fuzz-key-0123456789";
constexpr int64_t kLocalStartNs = 1'700'000'000'000'000'000;  // the node clock
constexpr int64_t kWallStartNs = 1'800'000'000'000'000'000;   // CLOCK_REALTIME
const NodeId kSelf = NodeIdFromName("fuzz-self");
const NodeId kPeerA = NodeIdFromName("fuzz-a");
const NodeId kPeerB = NodeIdFromName("fuzz-b");

const PacketCodec& Codec() {
  static const PacketCodec codec(*ProbeKey::FromBytes(kKey));
  return codec;
}

class FuzzClock final : public Clock {
 public:
  MonoTime Monotonic() const override { return MonoTime(std::chrono::nanoseconds(now_)); }
  WallTime Wall() const override { return WallTime(std::chrono::nanoseconds(kWallStartNs + now_)); }
  void Advance(int64_t ns) { now_ += ns; }
  int64_t now() const { return now_; }

 private:
  int64_t now_ = 1'000'000'000;
};

class FuzzNodeClock final : public NodeClock {
 public:
  explicit FuzzNodeClock(const FuzzClock& c) : c_(c) {}
  int64_t NowNs() const override { return kLocalStartNs + c_.now(); }
  int64_t FromKernelRealtime(int64_t realtime_ns) const override { return realtime_ns; }

 private:
  const FuzzClock& c_;
};

// Delivers one datagram per Poll; sends go nowhere (but get TX stamps).
class FuzzTransport final : public ProbeTransport {
 public:
  explicit FuzzTransport(const NodeClock& nc) : nc_(nc) {}
  Endpoint local() const override { return *Endpoint::Parse("10.0.0.1", 7311); }
  Result<uint32_t> Send(const Endpoint&, std::span<const uint8_t>) override { return Stamp(); }
  Result<std::array<uint32_t, 2>> SendPair(const Endpoint&, std::span<const uint8_t>, std::span<const uint8_t>,
                                            std::chrono::nanoseconds) override {
    return std::array<uint32_t, 2>{Stamp(), Stamp()};
  }
  Status Poll(std::chrono::nanoseconds, TransportEvents& out) override {
    for (uint32_t id : pending_tx_) out.tx_stamps.push_back({id, nc_.NowNs()});
    pending_tx_.clear();
    if (!next_.empty()) {
      out.received.push_back({*Endpoint::Parse("10.0.0.2", 7311), std::move(next_), nc_.NowNs(), true});
      next_.clear();
    }
    return Status::Ok();
  }
  void Deliver(std::vector<uint8_t> bytes) { next_ = std::move(bytes); }

 private:
  uint32_t Stamp() {
    pending_tx_.push_back(next_id_);
    return next_id_++;
  }
  const NodeClock& nc_;
  std::vector<uint8_t> next_;
  std::vector<uint32_t> pending_tx_;
  uint32_t next_id_ = 0;
};

struct Pipeline {
  FuzzClock clock;
  FuzzNodeClock node_clock{clock};
  FuzzTransport transport{node_clock};
  metrics::Registry registry;
  std::unique_ptr<ClockSyncService> service;
  uint64_t inputs = 0;
  Pipeline() {
    ClockSyncOptions o;
    o.self_name = "fuzz-self";
    o.known = {{"fuzz-a", kPeerA, *Endpoint::Parse("10.0.0.2", 7311), ""},
               {"fuzz-b", kPeerB, *Endpoint::Parse("10.0.0.3", 7311), ""}};
    o.selected = {o.known[0]};
    service = std::make_unique<ClockSyncService>(transport, node_clock, clock, Codec(), o, registry);
  }
};

std::vector<uint8_t> Sign(std::vector<uint8_t> bytes) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kKey, static_cast<int>(std::strlen(kKey)), bytes.data(), bytes.size(), mac, &len);
  bytes.insert(bytes.end(), mac, mac + kMacSize);
  return bytes;
}

// A packet's bytes without the MAC (what an input looks like after byte 0).
std::vector<uint8_t> Unsigned(const Packet& p) {
  auto bytes = *Codec().Encode(p);
  bytes.resize(bytes.size() - kMacSize);
  return bytes;
}

}  // namespace

// With LOCKSTEP_FUZZ_SEEDS=<dir>, writes seed inputs there: a probe pair and a
// report from a known peer, with plausible sequence numbers and timestamps.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("LOCKSTEP_FUZZ_SEEDS");
  if (dir == nullptr) return 0;
  const int64_t t = kLocalStartNs + 1'000'000'000;
  const uint64_t seq = static_cast<uint64_t>(kWallStartNs);
  ProbeBody probe;
  probe.pair_seq = 7;
  probe.spacing_ns = 5000;
  probe.tx_app_ns = t;
  probe.prev_valid = true;
  probe.prev_pair_seq = 6;
  probe.prev_tx_ns = {t - 20'000'000, t - 19'995'000};
  ProbeBody second = probe;
  second.index = 1;
  second.tx_app_ns += 5000;
  ReportBody report;
  report.rx = {{5, {t - 1000, t - 900}}, {6, {t - 500, 0}}};
  report.edges = {{std::min(kPeerA, kPeerB), std::max(kPeerA, kPeerB), t, -12.5, 1e-6, 900.0f, 12.5f, 1e-9f, true}};
  report.models = {{kPeerB, t, 2.5e3, -4e-6, 85.0f, 2e-10f}};
  int i = 0;
  for (const Packet& p : {Packet{kPeerA, kSelf, seq + 1, probe}, Packet{kPeerA, kSelf, seq + 2, second},
                          Packet{kPeerA, kSelf, seq + 3, report}}) {
    std::vector<uint8_t> input{3};
    auto bytes = Unsigned(p);
    input.insert(input.end(), bytes.begin(), bytes.end());
    std::ofstream(std::string(dir) + "/seed-" + std::to_string(i++), std::ios::binary)
        .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (bytes.size() >= kHeaderSize) {
    if (mode & 1) {
      const size_t body = bytes.size() - kHeaderSize;
      bytes[6] = static_cast<uint8_t>(body >> 8);
      bytes[7] = static_cast<uint8_t>(body);
    }
    if (mode & 2) {
      const uint8_t head[5] = {0x4c, 0x4b, 0x53, 0x50, kProbeVersion};
      std::memcpy(bytes.data(), head, sizeof head);
    }
  }
  bytes = Sign(std::move(bytes));

  // The codec alone: accepted packets re-encode to the same bytes.
  auto decoded = Codec().Decode(bytes);
  if (const Packet* p = std::get_if<Packet>(&decoded)) {
    auto again = Codec().Encode(*p);
    if (!again.ok() || *again != bytes) std::abort();
  }

  // Downstream: the agent's receive path.
  static auto pipeline = std::make_unique<Pipeline>();
  if (++pipeline->inputs % 4096 == 0) pipeline = std::make_unique<Pipeline>();
  Pipeline& pl = *pipeline;
  pl.transport.Deliver(std::move(bytes));
  pl.clock.Advance(pipeline->inputs % 32 == 0 ? 2'000'000'000 : 1'000'000);
  pl.service->RunOnce(std::chrono::nanoseconds(0));
  return 0;
}
