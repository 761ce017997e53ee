// The in-repo fake of rdma-core: a pure in-memory RC fabric behind the
// VerbsApi port, so the verbs transport runs unchanged here, where no RDMA
// device exists. Process-global (like a host's set of HCAs).
//
// What it models: devices with ports (state ACTIVE, RoCE link layer, a GID
// per port), PDs, MRs (lkeys checked on every gathered and scattered SGE),
// CQs (an overrun is counted, as a real CQ overrun is fatal), RC QPs with
// RESET -> INIT -> RTR -> RTS transitions checked, connected in pairs by
// destination QPN. A posted send is delivered when the fabric makes progress
// (at every poll_cq, at most `budget` work requests per call across all QPs,
// so work stays in flight between polls): its bytes are gathered from the
// sender's SGEs and scattered into the peer's oldest posted receive, which
// completes (IBV_WC_RECV) on the peer's receive CQ, and the send completes
// on the sender's send CQ. A send with no receive posted waits (RNR retry
// without limit, as rnr_retry = 7). Posting to a QP in the error state
// completes with IBV_WC_WR_FLUSH_ERR.
//
// Addressing is checked as a fabric would: a QP's address vector must name
// its peer (RoCE ports: GRH with the peer port's GID, source GID index 0;
// InfiniBand ports: the peer port's LID), its path MTU must not exceed the
// port's, and its send PSN must be the peer's receive PSN. A send on a QP
// that breaks any of these never arrives: it completes with
// IBV_WC_RETRY_EXC_ERR (counted as misrouted).
//
// Fault injection: FailPath(qpn) breaks the path under a QP pair. At the next
// progress each side's oldest outstanding send completes with
// IBV_WC_RETRY_EXC_ERR, the QP moves to the error state, and every other
// outstanding work request (sends and receives) completes with
// IBV_WC_WR_FLUSH_ERR. A QP with only receives posted notices nothing until
// it sends (as on a real fabric). `delivered_unacked` sends of the failing
// side first reach the peer while their sender still sees them fail (the
// acknowledgement was lost): the case that makes a replay a duplicate.
//
// Thread-safe (one mutex around the fabric).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/nccl/verbs_api.h"

namespace lockstep::nccl::fake {

struct FakeDevice {
  std::string name;
  int ports = 1;
  bool infiniband = false;  // link layer InfiniBand (LID routing) instead of Ethernet (RoCE: GRH required)
};

// Replaces the fabric with `devices` (empty: a host with rdma-core and no
// device). Objects of the previous fabric must have been destroyed.
void ResetFabric(std::vector<FakeDevice> devices);
// The table: the fake's functions, with post_send/post_recv/poll_cq also set
// in every context's ops (so verbs.h's inlines work on fake objects too).
VerbsApi FakeVerbsApi();

// Work requests moved per poll_cq call (>= 1; default 4).
void SetBudget(int work_requests);
// Breaks the path under `qp_num` and its peer (see the top). False when no
// such QP exists.
bool FailPath(uint32_t qp_num, int delivered_unacked = 0);

// Takes a port's link down (or up again): while down, sends from or to QPs on
// it fail like a broken path (above), QPs created meanwhile included. False
// when no such device and port exist.
bool SetPortDown(const std::string& device, int port, bool down);

struct FabricStats {
  uint64_t delivered = 0;       // sends that reached a receive
  uint64_t retry_exceeded = 0;  // IBV_WC_RETRY_EXC_ERR completions
  uint64_t flushed = 0;         // IBV_WC_WR_FLUSH_ERR completions
  uint64_t cq_overruns = 0;     // completions dropped on a full CQ (a bug in the user)
  uint64_t bad_sge = 0;         // SGEs outside their MR (a bug in the user)
  uint64_t misrouted = 0;       // sends whose address vector or PSN does not match the peer (a bug in the user)
  int live_objects = 0;         // contexts, PDs, MRs, CQs and QPs not yet destroyed
  std::vector<uint32_t> qps;    // live QP numbers, ascending
};
FabricStats Stats();

}  // namespace lockstep::nccl::fake
