#include "fake_verbs.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace lockstep::nccl::fake {
namespace {

struct Device {
  ibv_device dev{};
  int ports = 1;
  int index = 0;
  bool infiniband = false;
  std::vector<bool> port_down;  // by port number
};
struct Context {
  ibv_context ctx{};
  Device* device = nullptr;
};
struct Pd {
  ibv_pd pd{};
  int users = 0;  // MRs and QPs
};
struct Mr {
  ibv_mr mr{};
  Pd* pd = nullptr;
};
struct Cq {
  ibv_cq cq{};
  std::deque<ibv_wc> q;
  int users = 0;  // QPs
};
struct SendWr {
  uint64_t wr_id = 0;
  std::vector<ibv_sge> sge;
  bool signaled = false;
};
struct RecvWr {
  uint64_t wr_id = 0;
  std::vector<ibv_sge> sge;
};
struct Qp {
  ibv_qp qp{};
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  bool sig_all = false;
  uint32_t max_send = 0, max_recv = 0, max_sge = 0;
  uint32_t dest = 0;
  uint8_t port = 0;
  uint32_t sq_psn = 0, rq_psn = 0;
  ibv_ah_attr av{};
  bool path_failed = false;
  int deliver_then_fail = 0;
  std::deque<SendWr> sq;
  std::deque<RecvWr> rq;
};

struct Fabric {
  std::mutex mu;
  std::vector<std::unique_ptr<Device>> devices;
  std::map<uint32_t, Qp*> qps;
  std::map<uint32_t, Mr*> mrs;  // by lkey
  uint32_t next_qpn = 0x100;
  uint32_t next_key = 0x1000;
  int budget = 4;
  uint32_t cursor = 0;  // round robin over QPs
  FabricStats stats;
};
Fabric& F() {
  static Fabric* f = new Fabric;  // never destroyed: outlives every user at exit
  return *f;
}

void Push(Cq* cq, const ibv_wc& wc) {
  Fabric& f = F();
  if (static_cast<int>(cq->q.size()) >= cq->cq.cqe) {
    ++f.stats.cq_overruns;
    return;
  }
  if (wc.status == IBV_WC_RETRY_EXC_ERR) ++f.stats.retry_exceeded;
  if (wc.status == IBV_WC_WR_FLUSH_ERR) ++f.stats.flushed;
  cq->q.push_back(wc);
}

ibv_wc Wc(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode op, uint32_t qpn, uint32_t len = 0) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = qpn;
  wc.byte_len = len;
  return wc;
}

// Every outstanding work request of `qp` completes; the QP is in error.
void ToError(Qp* qp, bool retry_exceeded_first) {
  qp->qp.state = IBV_QPS_ERR;
  bool first = retry_exceeded_first;
  for (const SendWr& w : qp->sq) {
    Push(qp->scq, Wc(w.wr_id, first ? IBV_WC_RETRY_EXC_ERR : IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, qp->qp.qp_num));
    first = false;
  }
  qp->sq.clear();
  for (const RecvWr& w : qp->rq) Push(qp->rcq, Wc(w.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp.qp_num));
  qp->rq.clear();
}

// The bytes of `sge` (checked against the MRs), or false.
bool SgeOk(const ibv_sge& s, Pd* pd) {
  auto it = F().mrs.find(s.lkey);
  if (it == F().mrs.end() || it->second->pd != pd) return false;
  const auto base = reinterpret_cast<uintptr_t>(it->second->mr.addr);
  return s.addr >= base && s.addr + s.length <= base + it->second->mr.length;
}

// Delivers send `w` of `qp` into the peer's front receive; false when the
// receiver has no receive posted (RNR: wait). With `complete_sender`, `w`
// leaves the send queue and completes (when signaled); without, it stays
// queued (its sender has not heard of the delivery).
bool DeliverOne(Qp* qp, size_t at_sq, Qp* peer, bool complete_sender) {
  if (peer->rq.empty()) return false;
  const SendWr w = qp->sq[at_sq];
  if (complete_sender) qp->sq.erase(qp->sq.begin() + static_cast<long>(at_sq));
  RecvWr r = std::move(peer->rq.front());
  peer->rq.pop_front();
  std::vector<uint8_t> bytes;
  for (const ibv_sge& s : w.sge) {
    if (!SgeOk(s, qp->pd)) {
      ++F().stats.bad_sge;
      Push(qp->scq, Wc(w.wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, qp->qp.qp_num));
      peer->rq.push_front(std::move(r));
      ToError(qp, false);
      return true;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(s.addr);
    bytes.insert(bytes.end(), p, p + s.length);
  }
  size_t at = 0;
  for (const ibv_sge& s : r.sge) {
    if (at == bytes.size()) break;
    if (!SgeOk(s, peer->pd)) {
      ++F().stats.bad_sge;
      Push(peer->rcq, Wc(r.wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, peer->qp.qp_num));
      ToError(peer, false);
      return true;
    }
    const size_t n = std::min<size_t>(s.length, bytes.size() - at);
    std::memcpy(reinterpret_cast<void*>(s.addr), bytes.data() + at, n);
    at += n;
  }
  if (at < bytes.size()) {  // larger than the receive: both sides fail
    Push(peer->rcq, Wc(r.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, peer->qp.qp_num));
    ToError(peer, false);
    Push(qp->scq, Wc(w.wr_id, IBV_WC_REM_INV_REQ_ERR, IBV_WC_SEND, qp->qp.qp_num));
    ToError(qp, false);
    return true;
  }
  ++F().stats.delivered;
  Push(peer->rcq, Wc(r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, peer->qp.qp_num, static_cast<uint32_t>(bytes.size())));
  if (complete_sender && (w.signaled || qp->sig_all)) {
    Push(qp->scq, Wc(w.wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, qp->qp.qp_num));
  }
  return true;
}

uint16_t Lid(const Device* d, uint8_t port) { return static_cast<uint16_t>(d->index * 16 + port); }
std::array<uint8_t, 16> Gid(const Device* d, uint8_t port) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, static_cast<uint8_t>(d->index), port, 1};
}
const Device* DeviceOf(const Qp* q) { return reinterpret_cast<const Context*>(q->qp.context)->device; }
bool PortDown(const Qp* q) {
  const Device* d = DeviceOf(q);
  return q->port < d->port_down.size() && d->port_down[q->port];
}

// Whether `qp`'s address vector and PSN reach `peer` (see the header).
bool Routed(const Qp* qp, const Qp* peer) {
  const Device* pd = DeviceOf(peer);
  if (qp->sq_psn != peer->rq_psn) return false;
  if (DeviceOf(qp)->infiniband) return qp->av.dlid == Lid(pd, peer->port);
  const std::array<uint8_t, 16> g = Gid(pd, peer->port);
  return qp->av.is_global == 1 && std::memcmp(qp->av.grh.dgid.raw, g.data(), 16) == 0;
}

void Progress() {
  Fabric& f = F();
  int budget = f.budget;
  // Round robin from the QP after the last one served.
  std::vector<Qp*> order;
  for (auto it = f.qps.upper_bound(f.cursor); it != f.qps.end(); ++it) order.push_back(it->second);
  for (auto it = f.qps.begin(); it != f.qps.end() && it->first <= f.cursor; ++it) order.push_back(it->second);
  for (Qp* qp : order) {
    if (budget <= 0) break;
    if (qp->sq.empty() || qp->qp.state != IBV_QPS_RTS) continue;
    auto pit = f.qps.find(qp->dest);
    Qp* peer = pit == f.qps.end() ? nullptr : pit->second;
    const bool link_down = PortDown(qp) || (peer != nullptr && PortDown(peer));
    if (qp->path_failed || link_down || peer == nullptr || peer->qp.state == IBV_QPS_ERR) {
      // The first sends reach the peer, but their acknowledgements are lost:
      // they fail below like the rest.
      for (size_t k = 0; k < qp->sq.size() && qp->deliver_then_fail > 0 && peer != nullptr &&
                         peer->qp.state != IBV_QPS_ERR && DeliverOne(qp, k, peer, false);
           ++k) {
        --qp->deliver_then_fail;
      }
      if (qp->qp.state != IBV_QPS_ERR) ToError(qp, true);
      f.cursor = qp->qp.qp_num;
      --budget;
      continue;
    }
    if (peer->qp.state != IBV_QPS_RTR && peer->qp.state != IBV_QPS_RTS) continue;
    if (!Routed(qp, peer)) {  // the packets go nowhere: retries run out
      ++f.stats.misrouted;
      ToError(qp, true);
      f.cursor = qp->qp.qp_num;
      --budget;
      continue;
    }
    while (budget > 0 && !qp->sq.empty() && qp->qp.state == IBV_QPS_RTS && DeliverOne(qp, 0, peer, true)) --budget;
    f.cursor = qp->qp.qp_num;
  }
}

template <typename T>
T* Outer(void* inner) {
  return reinterpret_cast<T*>(inner);  // the ibv_* struct is each record's first member
}

// ---- the ibv_* functions ----

ibv_device** GetDeviceList(int* n) {
  std::lock_guard<std::mutex> lock(F().mu);
  auto** list = new ibv_device*[F().devices.size() + 1];
  for (size_t i = 0; i < F().devices.size(); ++i) list[i] = &F().devices[i]->dev;
  list[F().devices.size()] = nullptr;
  if (n != nullptr) *n = static_cast<int>(F().devices.size());
  return list;
}
void FreeDeviceList(ibv_device** list) { delete[] list; }
const char* GetDeviceName(ibv_device* d) { return d->name; }

int PostSend(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad);
int PostRecv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad);
int PollCq(ibv_cq* c, int n, ibv_wc* wc);

ibv_context* OpenDevice(ibv_device* d) {
  std::lock_guard<std::mutex> lock(F().mu);
  auto* c = new Context;
  c->ctx.device = d;
  c->ctx.ops.post_send = PostSend;
  c->ctx.ops.post_recv = PostRecv;
  c->ctx.ops.poll_cq = PollCq;
  c->ctx.abi_compat = nullptr;  // not an extended context: query_port takes the compat path
  c->device = Outer<Device>(d);
  ++F().stats.live_objects;
  return &c->ctx;
}
int CloseDevice(ibv_context* c) {
  std::lock_guard<std::mutex> lock(F().mu);
  delete Outer<Context>(c);
  --F().stats.live_objects;
  return 0;
}
int QueryPort(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  Device* d = Outer<Context>(c)->device;
  if (port < 1 || port > d->ports) return EINVAL;
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 1;
  a->lid = Lid(d, port);
  a->link_layer = d->infiniband ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
  return 0;
}
int QueryGid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  Device* d = Outer<Context>(c)->device;
  if (port < 1 || port > d->ports || index != 0) return EINVAL;
  const std::array<uint8_t, 16> g = Gid(d, port);  // ::ffff:10.<dev>.<port>.1, as RoCEv2 IPv4 GIDs look
  std::memcpy(gid->raw, g.data(), 16);
  return 0;
}
ibv_pd* AllocPd(ibv_context* c) {
  std::lock_guard<std::mutex> lock(F().mu);
  auto* p = new Pd;
  p->pd.context = c;
  p->pd.handle = F().next_key++;
  ++F().stats.live_objects;
  return &p->pd;
}
int DeallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(F().mu);
  Pd* p = Outer<Pd>(pd);
  if (p->users > 0) return EBUSY;
  delete p;
  --F().stats.live_objects;
  return 0;
}
ibv_mr* RegMr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (addr == nullptr || length == 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new Mr;
  m->pd = Outer<Pd>(pd);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = F().next_key++;
  m->mr.rkey = (access & IBV_ACCESS_REMOTE_WRITE) != 0 ? F().next_key++ : 0;
  m->mr.handle = m->mr.lkey;
  F().mrs[m->mr.lkey] = m;
  ++m->pd->users;
  ++F().stats.live_objects;
  return &m->mr;
}
int DeregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(F().mu);
  Mr* m = Outer<Mr>(mr);
  F().mrs.erase(mr->lkey);
  --m->pd->users;
  delete m;
  --F().stats.live_objects;
  return 0;
}
ibv_cq* CreateCq(ibv_context* c, int cqe, void* user, ibv_comp_channel* channel, int) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (cqe < 1) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new Cq;
  q->cq.context = c;
  q->cq.channel = channel;
  q->cq.cq_context = user;
  q->cq.cqe = cqe;
  ++F().stats.live_objects;
  return &q->cq;
}
int DestroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(F().mu);
  Cq* q = Outer<Cq>(cq);
  if (q->users > 0) return EBUSY;
  delete q;
  --F().stats.live_objects;
  return 0;
}
ibv_qp* CreateQp(ibv_pd* pd, ibv_qp_init_attr* a) {
  std::lock_guard<std::mutex> lock(F().mu);
  if (a == nullptr || a->qp_type != IBV_QPT_RC || a->send_cq == nullptr || a->recv_cq == nullptr ||
      a->cap.max_send_wr == 0 || a->cap.max_send_sge == 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new Qp;
  q->qp.context = pd->context;
  q->qp.qp_context = a->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_num = F().next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->pd = Outer<Pd>(pd);
  q->scq = Outer<Cq>(a->send_cq);
  q->rcq = Outer<Cq>(a->recv_cq);
  q->sig_all = a->sq_sig_all != 0;
  q->max_send = a->cap.max_send_wr;
  q->max_recv = a->cap.max_recv_wr;
  q->max_sge = std::max(a->cap.max_send_sge, a->cap.max_recv_sge);
  ++q->pd->users;
  ++q->scq->users;
  ++q->rcq->users;
  F().qps[q->qp.qp_num] = q;
  ++F().stats.live_objects;
  return &q->qp;
}
int ModifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lock(F().mu);
  Qp* q = Outer<Qp>(qp);
  if ((mask & IBV_QP_STATE) == 0) return EINVAL;
  const ibv_qp_state from = qp->state, to = a->qp_state;
  if (to == IBV_QPS_ERR) {
    ToError(q, false);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    q->sq.clear();
    q->rq.clear();
    qp->state = IBV_QPS_RESET;
    return 0;
  }
  if (to == IBV_QPS_INIT && from == IBV_QPS_RESET) {
    const int need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    if ((mask & need) != need) return EINVAL;
    if (a->port_num < 1 || a->port_num > Outer<Context>(qp->context)->device->ports) return EINVAL;
    q->port = a->port_num;
  } else if (to == IBV_QPS_RTR && from == IBV_QPS_INIT) {
    const int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                     IBV_QP_MIN_RNR_TIMER;
    if ((mask & need) != need) return EINVAL;
    const Device* d = Outer<Context>(qp->context)->device;
    if (!d->infiniband && (a->ah_attr.is_global != 1 || a->ah_attr.grh.sgid_index != 0)) return EINVAL;  // RoCE: GRH
    if (a->ah_attr.port_num != 0 && a->ah_attr.port_num != q->port) return EINVAL;
    if (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096) return EINVAL;
    q->dest = a->dest_qp_num;
    q->rq_psn = a->rq_psn;
    q->av = a->ah_attr;
  } else if (to == IBV_QPS_RTS && from == IBV_QPS_RTR) {
    const int need = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    if ((mask & need) != need) return EINVAL;
    q->sq_psn = a->sq_psn;
  } else {
    return EINVAL;
  }
  qp->state = to;
  return 0;
}
int DestroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(F().mu);
  Qp* q = Outer<Qp>(qp);
  F().qps.erase(qp->qp_num);
  --q->pd->users;
  --q->scq->users;
  --q->rcq->users;
  delete q;
  --F().stats.live_objects;
  return 0;
}
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(F().mu);
  Qp* q = Outer<Qp>(qp);
  for (; wr != nullptr; wr = wr->next) {
    const bool ok_state = qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_ERR;
    if (!ok_state || wr->opcode != IBV_WR_SEND || wr->num_sge < 1 || static_cast<uint32_t>(wr->num_sge) > q->max_sge ||
        q->sq.size() >= q->max_send) {
      *bad = wr;
      return !ok_state ? EINVAL : q->sq.size() >= q->max_send ? ENOMEM : EINVAL;
    }
    if (qp->state == IBV_QPS_ERR) {
      Push(q->scq, Wc(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, qp->qp_num));
      continue;
    }
    q->sq.push_back(SendWr{.wr_id = wr->wr_id,
                           .sge = std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge),
                           .signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0});
  }
  return 0;
}
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(F().mu);
  Qp* q = Outer<Qp>(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || q->rq.size() >= q->max_recv || wr->num_sge < 1 ||
        static_cast<uint32_t>(wr->num_sge) > q->max_sge) {
      *bad = wr;
      return qp->state == IBV_QPS_RESET ? EINVAL : ENOMEM;
    }
    if (qp->state == IBV_QPS_ERR) {
      Push(q->rcq, Wc(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp_num));
      continue;
    }
    q->rq.push_back(RecvWr{.wr_id = wr->wr_id, .sge = std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
  }
  return 0;
}
int PollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(F().mu);
  Progress();
  Cq* q = Outer<Cq>(cq);
  int got = 0;
  while (got < n && !q->q.empty()) {
    wc[got++] = q->q.front();
    q->q.pop_front();
  }
  return got;
}

}  // namespace

void ResetFabric(std::vector<FakeDevice> devices) {
  std::lock_guard<std::mutex> lock(F().mu);
  Fabric& f = F();
  f.devices.clear();
  for (size_t i = 0; i < devices.size(); ++i) {
    auto d = std::make_unique<Device>();
    std::snprintf(d->dev.name, sizeof d->dev.name, "%s", devices[i].name.c_str());
    std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs%zu", i);
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    d->ports = devices[i].ports;
    d->infiniband = devices[i].infiniband;
    d->port_down.assign(static_cast<size_t>(devices[i].ports) + 1, false);
    d->index = static_cast<int>(i);
    f.devices.push_back(std::move(d));
  }
  const int live = f.stats.live_objects;
  f.stats = FabricStats{};
  f.stats.live_objects = live;
  f.budget = 4;
}

VerbsApi FakeVerbsApi() {
  VerbsApi a;
  a.get_device_list = GetDeviceList;
  a.free_device_list = FreeDeviceList;
  a.get_device_name = GetDeviceName;
  a.open_device = OpenDevice;
  a.close_device = CloseDevice;
  a.query_port = QueryPort;
  a.query_gid = QueryGid;
  a.alloc_pd = AllocPd;
  a.dealloc_pd = DeallocPd;
  a.reg_mr = RegMr;
  a.dereg_mr = DeregMr;
  a.create_cq = CreateCq;
  a.destroy_cq = DestroyCq;
  a.create_qp = CreateQp;
  a.modify_qp = ModifyQp;
  a.destroy_qp = DestroyQp;
  a.post_send = PostSend;
  a.post_recv = PostRecv;
  a.poll_cq = PollCq;
  a.source = "fake";
  return a;
}

void SetBudget(int n) {
  std::lock_guard<std::mutex> lock(F().mu);
  F().budget = std::max(1, n);
}

bool FailPath(uint32_t qpn, int delivered_unacked) {
  std::lock_guard<std::mutex> lock(F().mu);
  auto it = F().qps.find(qpn);
  if (it == F().qps.end()) return false;
  it->second->path_failed = true;
  it->second->deliver_then_fail = delivered_unacked;
  auto peer = F().qps.find(it->second->dest);
  if (peer != F().qps.end()) peer->second->path_failed = true;
  return true;
}

bool SetPortDown(const std::string& device, int port, bool down) {
  std::lock_guard<std::mutex> lock(F().mu);
  for (auto& d : F().devices) {
    if (d->dev.name == device && port >= 1 && port <= d->ports) {
      d->port_down[port] = down;
      return true;
    }
  }
  return false;
}

FabricStats Stats() {
  std::lock_guard<std::mutex> lock(F().mu);
  FabricStats s = F().stats;
  for (const auto& [qpn, qp] : F().qps) s.qps.push_back(qpn);
  return s;
}

}  // namespace lockstep::nccl::fake
