// PeerActivity: which peers tiered probing treats as carrying traffic.
#include <catch2/catch.hpp>

#include "lockstep/agent/peer_activity.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

MonoTime At(Nanos d) { return MonoTime{} + 1h + d; }

TEST_CASE("peer activity: a peer is active while a connection to it moves bytes, for the hold after",
          "[daemonset][tiers]") {
  PeerActivity a(10s);
  const uint32_t p1 = 0x0a00c801, p2 = 0x0a00c802, p3 = 0x0a00c803;
  // First look: connections that moved bytes already count; an empty one does not.
  a.Update(At(0s), {{.cookie = 1, .remote = p1, .bytes = 5000}, {.cookie = 2, .remote = p2, .bytes = 0}});
  CHECK(a.Active(p1, At(0s)));
  CHECK_FALSE(a.Active(p2, At(0s)));
  CHECK_FALSE(a.Active(p3, At(0s)));
  // p1 stops moving bytes, p2 starts.
  a.Update(At(1s), {{.cookie = 1, .remote = p1, .bytes = 5000}, {.cookie = 2, .remote = p2, .bytes = 10}});
  CHECK(a.Active(p1, At(1s)));  // within the hold
  CHECK(a.Active(p2, At(1s)));
  a.Update(At(10s), {{.cookie = 1, .remote = p1, .bytes = 5000}, {.cookie = 2, .remote = p2, .bytes = 10}});
  CHECK(a.Active(p1, At(10s)));  // exactly the hold
  a.Update(At(11s), {{.cookie = 1, .remote = p1, .bytes = 5000}, {.cookie = 2, .remote = p2, .bytes = 10}});
  CHECK_FALSE(a.Active(p1, At(11s)));
  CHECK(a.Active(p2, At(11s)));
  // A closed connection and a new one to the same peer (new cookie, bytes
  // already moved) count as moving; a remote that is no peer changes nothing.
  a.Update(At(12s), {{.cookie = 3, .remote = p1, .bytes = 1}});
  CHECK(a.Active(p1, At(12s)));
  // Connections that vanish: the peer stays active for the hold, then not.
  a.Update(At(13s), {});
  CHECK(a.Active(p1, At(13s)));
  a.Update(At(23s), {});
  CHECK_FALSE(a.Active(p1, At(23s)));
  CHECK_FALSE(a.Active(p2, At(23s)));
}

}  // namespace
}  // namespace lockstep::agent
