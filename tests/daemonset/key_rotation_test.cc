// Probe key rotation: the codec accepts the current and the previous key, and
// ProbeKeyFile picks up a rewritten (or symlink-swapped) key file.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lockstep/agent/net/probe_key_file.h"
#include "lockstep/agent/packet_filter.h"
#include "packet_samples.h"

namespace lockstep::agent {
namespace {

ProbeKey K(const std::string& s) { return *ProbeKey::FromBytes(s); }

bool Accepts(const PacketCodec& receiver, const PacketCodec& sender) {
  Packet p = test::SampleProbe();
  return std::holds_alternative<Packet>(receiver.Decode(*sender.Encode(p)));
}

TEST_CASE("after a rotation the old key is still accepted until the next one", "[daemonset][netsurface]") {
  PacketCodec old_peer(K("key-one-0123456789")), new_peer(K("key-two-0123456789")),
      third_peer(K("key-three-0123456789"));
  PacketCodec codec(K("key-one-0123456789"));
  REQUIRE(codec.accepted_keys() == 1);
  REQUIRE_FALSE(Accepts(codec, new_peer));
  codec.Rotate(K("key-two-0123456789"));
  REQUIRE(codec.accepted_keys() == 2);
  REQUIRE(Accepts(codec, old_peer));  // a peer that has not reloaded yet
  REQUIRE(Accepts(codec, new_peer));
  REQUIRE(Accepts(new_peer, codec));  // we sign with the new key
  REQUIRE_FALSE(Accepts(old_peer, codec));
  codec.Rotate(K("key-two-0123456789"));  // the same key again: no change
  REQUIRE(Accepts(codec, old_peer));
  codec.Rotate(K("key-three-0123456789"));  // a third key drops the oldest
  REQUIRE_FALSE(Accepts(codec, old_peer));
  REQUIRE(Accepts(codec, new_peer));
  REQUIRE(Accepts(codec, third_peer));
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/lockstep-key-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary | std::ios::trunc) << text;
  }
};

TEST_CASE("a key file swapped like a kubelet Secret update rotates the codec", "[daemonset][netsurface]") {
  TempDir dir;
  // Kubelet's layout: key -> ..data/key, ..data -> ..<timestamp>; an update
  // writes a new timestamped dir and renames a new ..data symlink over the old.
  std::filesystem::create_directory(dir.path / "..v1");
  dir.Write("..v1/key", "first-key-0123456789\n");
  std::filesystem::create_directory_symlink("..v1", dir.path / "..data");
  std::filesystem::create_symlink("..data/key", dir.path / "key");
  auto file = ProbeKeyFile::Open((dir.path / "key").string());
  REQUIRE(file.ok());
  REQUIRE(file->key().bytes() == "first-key-0123456789");
  PacketCodec codec(file->key());
  PacketCodec first(K("first-key-0123456789")), second(K("second-key-0123456789"));

  auto r = file->Reload(codec);
  REQUIRE(r.ok());
  REQUIRE_FALSE(*r);  // unchanged

  std::filesystem::create_directory(dir.path / "..v2");
  dir.Write("..v2/key", "second-key-0123456789");
  std::filesystem::create_directory_symlink("..v2", dir.path / "..data_tmp");
  std::filesystem::rename(dir.path / "..data_tmp", dir.path / "..data");
  r = file->Reload(codec);
  REQUIRE(r.ok());
  REQUIRE(*r);
  REQUIRE(Accepts(codec, first));
  REQUIRE(Accepts(codec, second));
  REQUIRE(Accepts(second, codec));

  // A broken update (invalid key) keeps the current key and says why.
  std::filesystem::create_directory(dir.path / "..v3");
  dir.Write("..v3/key", "short");
  std::filesystem::create_directory_symlink("..v3", dir.path / "..data_tmp");
  std::filesystem::rename(dir.path / "..data_tmp", dir.path / "..data");
  r = file->Reload(codec);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().message.find("16 and 4096 bytes") != std::string::npos);
  REQUIRE(Accepts(second, codec));
}

TEST_CASE("the filter's acceptance window", "[daemonset][netsurface]") {
  PacketCodec codec(test::Key());
  PacketFilter filter(codec, 22);
  const ReceiverClocks now{1'800'000'000'000'000'000, 1'700'000'000'100'000'000};
  Packet p = test::SampleProbe();
  p.seq = UINT64_MAX;
  REQUIRE(std::get<DropReason>(filter.Accept(*codec.Encode(p), now)) == DropReason::kSeqAhead);
  p.seq = static_cast<uint64_t>(now.wall_ns) + 59'000'000'000;  // within the skew
  REQUIRE(std::holds_alternative<Packet>(filter.Accept(*codec.Encode(p), now)));
  p.seq = 5;  // far behind the wall clock is fine for a long-running sender ...
  Packet q = test::SampleProbe();
  q.sender = 12;
  q.seq = 5;
  REQUIRE(std::holds_alternative<Packet>(filter.Accept(*codec.Encode(q), now)));
  std::get<ProbeBody>(q.body).tx_app_ns = INT64_MIN;  // ... a timestamp far from ours is not
  q.seq = 6;
  REQUIRE(std::get<DropReason>(filter.Accept(*codec.Encode(q), now)) == DropReason::kImplausibleTime);
  Packet r = test::SampleReport();
  r.sender = 13;
  r.seq = 7;
  std::get<ReportBody>(r.body).rx = {{5, {1'700'000'000'100'000'000, 0}}};
  std::get<ReportBody>(r.body).models[0].t_ref_ns = 1'700'000'000'000'000'000;
  REQUIRE(std::holds_alternative<Packet>(filter.Accept(*codec.Encode(r), now)));
  std::get<ReportBody>(r.body).models[0].t_ref_ns = INT64_MAX;
  r.seq = 8;
  REQUIRE(std::get<DropReason>(filter.Accept(*codec.Encode(r), now)) == DropReason::kImplausibleTime);
  REQUIRE(filter.dropped(DropReason::kSeqAhead) == 1);
  REQUIRE(filter.dropped(DropReason::kImplausibleTime) == 2);
}

TEST_CASE("senders that leave the known set are forgotten", "[daemonset][netsurface]") {
  PacketCodec codec(test::Key());
  PacketFilter filter(codec, 22);
  filter.SetKnownSenders({11, 12});
  Packet p = test::SampleProbe();
  REQUIRE(std::holds_alternative<Packet>(filter.Accept(*codec.Encode(p))));
  REQUIRE(filter.tracked_senders() == 1);
  filter.SetKnownSenders({12});
  REQUIRE(filter.tracked_senders() == 0);
  p.seq = 1001;
  REQUIRE(std::get<DropReason>(filter.Accept(*codec.Encode(p))) == DropReason::kUnknownSender);
}

}  // namespace
}  // namespace lockstep::agent
