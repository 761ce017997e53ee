#include "lockstep/nccl/verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <utility>

#include "lockstep/nccl/delay_stats.h"
#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/handle.h"
#include "lockstep/nccl/stripe_receiver.h"

namespace lockstep::nccl {
namespace {

// ---- the QP exchange (bootstrap TCP) ----

constexpr uint32_t kRequestMagic = 0x5256'4b4cu;  // "LKVR"
constexpr uint32_t kReplyMagic = 0x5056'4b4cu;    // "LKVP"
constexpr size_t kQpInfoBytes = 32;
constexpr size_t kRequestHead = 32;  // magic, flags, token, nqps, reserved, checksum, connection id
constexpr size_t kReplyHead = 24;    // magic, nqps, slots, slot payload bytes, checksum
constexpr int kAckSlots = 16;        // the sender's receives for acks, per QP
constexpr int kPollBatch = 16;

struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t global = 0;
  uint8_t mtu = 0;  // enum ibv_mtu
  std::array<uint8_t, 16> gid{};
};

void PutInfo(uint8_t* p, const QpInfo& q) {
  PutU32(p, q.qpn);
  PutU32(p + 4, q.psn);
  PutU16(p + 8, q.lid);
  p[10] = q.port;
  p[11] = q.global;
  p[12] = q.mtu;
  std::memcpy(p + 16, q.gid.data(), 16);
}
QpInfo GetInfo(const uint8_t* p) {
  QpInfo q;
  q.qpn = GetU32(p);
  q.psn = GetU32(p + 4);
  q.lid = GetU16(p + 8);
  q.port = p[10];
  q.global = p[11];
  q.mtu = p[12];
  std::memcpy(q.gid.data(), p + 16, 16);
  return q;
}

// ibv_wc_status_str is a libibverbs export; the plugin links none of them.
std::string StatusName(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR)";
    case IBV_WC_WR_FLUSH_ERR:
      return "work request flushed (IBV_WC_WR_FLUSH_ERR)";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "receiver not ready, retries exceeded (IBV_WC_RNR_RETRY_EXC_ERR)";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error (IBV_WC_LOC_PROT_ERR)";
    case IBV_WC_LOC_LEN_ERR:
      return "local length error (IBV_WC_LOC_LEN_ERR)";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request (IBV_WC_REM_INV_REQ_ERR)";
    default:
      return "completion status " + std::to_string(static_cast<int>(s));
  }
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Reads into `buf` up to `want` bytes; false on EOF or error (with `err`).
bool ReadSome(int fd, std::vector<uint8_t>* buf, size_t want, std::string* err) {
  while (buf->size() < want) {
    uint8_t tmp[4096];
    const ssize_t n = ::recv(fd, tmp, std::min(sizeof tmp, want - buf->size()), 0);
    if (n > 0) {
      buf->insert(buf->end(), tmp, tmp + n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    *err = n == 0 ? "the peer closed the QP exchange" : Errno("recv");
    return false;
  }
  return true;
}
bool WriteSome(int fd, const std::vector<uint8_t>& buf, size_t* at, std::string* err) {
  while (*at < buf.size()) {
    const ssize_t n = ::send(fd, buf.data() + *at, buf.size() - *at, MSG_NOSIGNAL);
    if (n > 0) {
      *at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    *err = Errno("send");
    return false;
  }
  return true;
}

// ::ffff:a.b.c.d, as RoCEv2 IPv4 GIDs are.
bool IsMappedIpv4(const uint8_t* gid) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kMapped, sizeof kMapped) == 0;
}

// ---- devices ----

struct RailDevice {
  std::string name;  // device:port
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  uint16_t lid = 0;
  bool global = false;
  ibv_mtu mtu = IBV_MTU_1024;
  ibv_gid gid{};
};

struct VerbsShared {
  VerbsApi api;
  VerbsTransportConfig config;
  WarnFn warn, info;
  std::vector<RailDevice> rails;
  std::mt19937_64 rng{std::random_device{}()};
  ~VerbsShared() {
    for (RailDevice& r : rails) {
      if (r.pd) api.dealloc_pd(r.pd);
      if (r.ctx) api.close_device(r.ctx);
    }
  }
};

// ---- one QP of a connection, with its CQ and registered slots ----

enum class Kind : uint8_t { kSendData = 0, kSendAck = 1, kRecv = 2 };
uint64_t WrId(int qp, Kind k, uint32_t slot) {
  return (uint64_t{static_cast<uint32_t>(qp)} << 32) | (uint64_t{static_cast<uint8_t>(k)} << 24) | slot;
}
int WrQp(uint64_t id) { return static_cast<int>(id >> 32); }
Kind WrKind(uint64_t id) { return static_cast<Kind>((id >> 24) & 0xff); }
uint32_t WrSlot(uint64_t id) { return static_cast<uint32_t>(id & 0xffffff); }

struct Qp {
  int index = 0;
  int rail = 0;
  bool standby = false;
  bool alive = true;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  std::vector<uint8_t> send_buf, recv_buf;
  ibv_mr* send_mr = nullptr;
  ibv_mr* recv_mr = nullptr;
  size_t send_slot = 0, recv_slot = 0;  // bytes per slot
  std::vector<uint32_t> free_send;
  int recv_slots = 0;
};

// The QPs of one connection: created, exchanged, connected, destroyed.
class QpSet {
 public:
  explicit QpSet(std::shared_ptr<VerbsShared> d) : d_(std::move(d)) {}
  ~QpSet() {
    if (reported_ && d_->config.closed) d_->config.closed(conn_, send_);
    const VerbsApi& api = d_->api;
    for (Qp& q : qps_) {
      if (q.qp) api.destroy_qp(q.qp);
      if (q.cq) api.destroy_cq(q.cq);
      if (q.send_mr) api.dereg_mr(q.send_mr);
      if (q.recv_mr) api.dereg_mr(q.recv_mr);
    }
  }
  QpSet(const QpSet&) = delete;
  QpSet& operator=(const QpSet&) = delete;

  // `n` QPs; the last is the standby when `standby`. Slots: `send` x
  // `send_bytes` and `recv` x `recv_bytes` per QP. Receives posted at INIT.
  Status Create(int n, bool standby, int send, size_t send_bytes, int recv, size_t recv_bytes) {
    const VerbsApi& api = d_->api;
    const int nrails = static_cast<int>(d_->rails.size());
    qps_.resize(n);
    for (int i = 0; i < n; ++i) {
      Qp& q = qps_[i];
      q.index = i;
      q.standby = standby && i == n - 1;
      q.rail = q.standby ? 1 % nrails : i % nrails;
      const RailDevice& r = d_->rails[q.rail];
      q.send_slot = send_bytes;
      q.recv_slot = recv_bytes;
      q.recv_slots = recv;
      q.send_buf.assign(send * send_bytes, 0);
      q.recv_buf.assign(recv * recv_bytes, 0);
      q.send_mr = api.reg_mr(r.pd, q.send_buf.data(), q.send_buf.size(), IBV_ACCESS_LOCAL_WRITE);
      q.recv_mr = api.reg_mr(r.pd, q.recv_buf.data(), q.recv_buf.size(), IBV_ACCESS_LOCAL_WRITE);
      if (!q.send_mr || !q.recv_mr) return Unavailable(Errno(("ibv_reg_mr on " + r.name).c_str()));
      if (Status st = Arm(i); !st.ok()) return st;
    }
    return Status::Ok();
  }

  // QP i afresh (a new CQ and QP, in INIT, receives posted, every send slot
  // free), replacing a failed one: its stale completions go with its CQ.
  Status Recreate(int i) {
    Qp& q = qps_[i];
    if (q.qp) d_->api.destroy_qp(q.qp);
    if (q.cq) d_->api.destroy_cq(q.cq);
    q.qp = nullptr;
    q.cq = nullptr;
    return Arm(i);
  }

  Status Arm(int i) {
    const VerbsApi& api = d_->api;
    Qp& q = qps_[i];
    const RailDevice& r = d_->rails[q.rail];
    const int send = static_cast<int>(q.send_buf.size() / q.send_slot);
    const int recv = q.recv_slots;
    q.psn = static_cast<uint32_t>(d_->rng()) & 0xffffff;
    q.free_send.clear();
    for (int s = send - 1; s >= 0; --s) q.free_send.push_back(static_cast<uint32_t>(s));
    q.cq = api.create_cq(r.ctx, send + recv + 4, nullptr, nullptr, 0);
    if (!q.cq) return Unavailable(Errno(("ibv_create_cq on " + r.name).c_str()));
    ibv_qp_init_attr ia{};
    ia.send_cq = q.cq;
    ia.recv_cq = q.cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = static_cast<uint32_t>(send);
    ia.cap.max_recv_wr = static_cast<uint32_t>(recv);
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    q.qp = api.create_qp(r.pd, &ia);
    if (!q.qp) return Unavailable(Errno(("ibv_create_qp on " + r.name).c_str()));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = r.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
    if (int e = api.modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      return Unavailable("ibv_modify_qp to INIT on " + r.name + ": " + std::strerror(e));
    }
    for (int s = 0; s < recv; ++s) {
      if (Status st = PostRecv(i, static_cast<uint32_t>(s)); !st.ok()) return st;
    }
    return Status::Ok();
  }

  QpInfo Info(int i) const {
    const Qp& q = qps_[i];
    const RailDevice& r = d_->rails[q.rail];
    QpInfo info{.qpn = q.qp->qp_num,
                .psn = q.psn,
                .lid = r.lid,
                .port = r.port,
                .global = r.global ? uint8_t{1} : uint8_t{0},
                .mtu = static_cast<uint8_t>(r.mtu)};
    std::memcpy(info.gid.data(), r.gid.raw, 16);
    return info;
  }

  // INIT -> RTR -> RTS against the peer's QPs.
  Status Connect(const std::vector<QpInfo>& peer) {
    for (const Qp& q : qps_) {
      if (Status s = ConnectOne(q.index, peer[q.index]); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status ConnectOne(int i, const QpInfo& p) {
    const VerbsApi& api = d_->api;
    {
      Qp& q = qps_[i];
      const RailDevice& r = d_->rails[q.rail];
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = static_cast<ibv_mtu>(std::min<int>(r.mtu, p.mtu));
      a.dest_qp_num = p.qpn;
      a.rq_psn = p.psn;
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;
      a.ah_attr.dlid = p.lid;
      a.ah_attr.port_num = r.port;
      if (r.global || p.global) {
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, p.gid.data(), 16);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d_->config.gid_index);
        a.ah_attr.grh.hop_limit = 255;
        // The standby on a rail a primary uses: another flow label, so
        // another RoCEv2 UDP source port (another ECMP hash).
        a.ah_attr.grh.flow_label = q.standby ? 0x5a5a5u : 0;
      }
      const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      if (int e = api.modify_qp(q.qp, &a, rtr)) {
        return Unavailable("ibv_modify_qp to RTR on " + r.name + ": " + std::strerror(e));
      }
      a = ibv_qp_attr{};
      a.qp_state = IBV_QPS_RTS;
      a.timeout = 14;   // 4.096 us << 14 = 67 ms per try
      a.retry_cnt = 7;  // then IBV_WC_RETRY_EXC_ERR: about half a second on a dead path
      a.rnr_retry = 7;  // receiver not ready: retry forever (credit bounds it)
      a.sq_psn = q.psn;
      a.max_rd_atomic = 1;
      const int rts =
          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
      if (int e = api.modify_qp(q.qp, &a, rts)) {
        return Unavailable("ibv_modify_qp to RTS on " + r.name + ": " + std::strerror(e));
      }
    }
    return Status::Ok();
  }

  Status PostRecv(int i, uint32_t slot) {
    Qp& q = qps_[i];
    ibv_sge sge{.addr = reinterpret_cast<uintptr_t>(q.recv_buf.data() + slot * q.recv_slot),
                .length = static_cast<uint32_t>(q.recv_slot),
                .lkey = q.recv_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = WrId(i, Kind::kRecv, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int e = d_->api.post_recv(q.qp, &wr, &bad))
      return Unavailable(std::string("ibv_post_recv: ") + std::strerror(e));
    return Status::Ok();
  }

  // Sends `len` bytes already in send slot `slot` of QP i.
  Status PostSend(int i, Kind kind, uint32_t slot, size_t len) {
    Qp& q = qps_[i];
    ibv_sge sge{.addr = reinterpret_cast<uintptr_t>(q.send_buf.data() + slot * q.send_slot),
                .length = static_cast<uint32_t>(len),
                .lkey = q.send_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = WrId(i, kind, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int e = d_->api.post_send(q.qp, &wr, &bad))
      return Unavailable(std::string("ibv_post_send: ") + std::strerror(e));
    return Status::Ok();
  }

  uint8_t* SendSlot(int i, uint32_t slot) { return qps_[i].send_buf.data() + slot * qps_[i].send_slot; }
  const uint8_t* RecvSlot(int i, uint32_t slot) const { return qps_[i].recv_buf.data() + slot * qps_[i].recv_slot; }

  // Polls every live QP's CQ; calls f(wc) for each completion.
  template <typename F>
  void Poll(F&& f) {
    ibv_wc wc[kPollBatch];
    for (Qp& q : qps_) {
      for (;;) {
        const int n = d_->api.poll_cq(q.cq, kPollBatch, wc);
        for (int k = 0; k < n; ++k) f(wc[k]);
        if (n < kPollBatch) break;
      }
    }
  }

  // Who the connection is, for reports: its id (the connector's, shared by
  // both ends), the peer's host and QPs.
  void SetIdentity(uint64_t conn, const std::array<uint8_t, 4>& peer_host) {
    conn_ = conn;
    peer_host_ = peer_host;
  }
  void SetPeer(std::vector<QpInfo> peer) { peer_ = std::move(peer); }
  void SetPeerOne(int i, const QpInfo& info) {
    if (static_cast<size_t>(i) < peer_.size()) peer_[i] = info;
  }
  uint64_t conn_id() const { return conn_; }
  void Count(int i, uint64_t bytes) {
    bytes_.resize(qps_.size());
    chunks_.resize(qps_.size());
    bytes_[i] += bytes;
    ++chunks_[i];
  }
  uint64_t failovers = 0;

  // The send stamp for a chunk now (0: none).
  uint64_t Stamp() const { return d_->config.fabric_now_ns ? d_->config.fabric_now_ns() : 0; }
  // A chunk stamped `send_ns` arrived on QP i.
  void OnStamp(int i, uint64_t send_ns) {
    if (send_ns == 0 || !d_->config.fabric_now_ns) return;
    const uint64_t now = d_->config.fabric_now_ns();
    if (now == 0) return;
    delays_.resize(qps_.size());
    delays_[i].Add(static_cast<int64_t>(now - send_ns));
  }

  // Reports every QP's counters and `state(i)` when a second has passed.
  template <typename State>
  void ReportIfDue(bool send, State&& state) {
    const auto& report = d_->config.report;
    if (!report) return;
    const auto now = std::chrono::steady_clock::now();
    if (reported_ && now < next_report_) return;
    next_report_ = now + std::chrono::seconds(1);
    reported_ = true;
    send_ = send;
    bytes_.resize(qps_.size());
    chunks_.resize(qps_.size());
    delays_.resize(qps_.size());
    std::vector<StreamReport> r;
    for (const Qp& q : qps_) {
      StreamReport s{.conn = conn_,
                     .send = send,
                     .stream = q.index,
                     .rail = Path(q.index, peer_host_).rail_ipv4,
                     .peer = peer_host_,
                     .bytes = bytes_[q.index],
                     .chunks = chunks_[q.index],
                     .owd_p50_ns = delays_[q.index].Percentile(0.5),  // receivers only
                     .owd_p99_ns = delays_[q.index].Percentile(0.99),
                     .failovers = failovers,
                     .state = state(q.index)};
      if (static_cast<size_t>(q.index) < peer_.size() && IsMappedIpv4(peer_[q.index].gid.data())) {
        std::memcpy(s.remote.data(), peer_[q.index].gid.data() + 12, 4);
      }
      r.push_back(std::move(s));
    }
    report(conn_, send, std::move(r));
  }

  std::vector<Qp>& qps() { return qps_; }
  VerbsShared& devices() { return *d_; }
  VerbsPath Path(int i, const std::array<uint8_t, 4>& peer_host) const {
    VerbsPath p{.rail = qps_[i].rail, .peer_host = peer_host};
    const uint8_t* g = d_->rails[qps_[i].rail].gid.raw;
    if (IsMappedIpv4(g)) std::memcpy(p.rail_ipv4.data(), g + 12, 4);
    return p;
  }

  std::string Name(int i) const {
    return "QP " + std::to_string(i) + (qps_[i].standby ? " (standby)" : "") + " on " + d_->rails[qps_[i].rail].name;
  }

 private:
  std::shared_ptr<VerbsShared> d_;
  std::vector<Qp> qps_;
  uint64_t conn_ = 0;
  std::array<uint8_t, 4> peer_host_{};
  std::vector<QpInfo> peer_;
  std::vector<uint64_t> bytes_, chunks_;
  std::vector<DelayStats> delays_;
  bool reported_ = false, send_ = true;
  std::chrono::steady_clock::time_point next_report_{};
};

// ---- the control channel: the QP exchange's TCP socket, kept open ----
//
// After setup it carries QP re-creation: the sender re-creates a failed QP
// and sends REARM (index, its new QP); the receiver re-creates its side,
// connects it and answers REARMED (index, its new QP); the sender connects
// and re-admits it. 40-byte frames: magic, index, QpInfo.

constexpr uint32_t kRearmMagic = 0x4356'4b4cu;    // "LKVC"
constexpr uint32_t kRearmedMagic = 0x4456'4b4cu;  // "LKVD"
constexpr size_t kControlBytes = 8 + kQpInfoBytes;

struct ControlFrame {
  uint32_t magic = 0;
  int index = 0;
  QpInfo info;
};

class Control {
 public:
  explicit Control(Socket s) : sock_(std::move(s)) {}
  bool ok() const { return ok_; }
  void Queue(const ControlFrame& f) {
    const size_t at = out_.size();
    out_.resize(at + kControlBytes);
    PutU32(out_.data() + at, f.magic);
    PutU32(out_.data() + at + 4, static_cast<uint32_t>(f.index));
    PutInfo(out_.data() + at + 8, f.info);
  }
  // Writes what is queued and returns the frames that arrived.
  std::vector<ControlFrame> Exchange() {
    std::vector<ControlFrame> got;
    if (!ok_) return got;
    std::string err;
    if (!WriteSome(sock_.get(), out_, &wrote_, &err)) ok_ = false;
    if (wrote_ == out_.size()) {
      out_.clear();
      wrote_ = 0;
    }
    if (ok_ && !ReadSome(sock_.get(), &in_, in_.size() + 4096, &err)) ok_ = false;
    size_t at = 0;
    while (in_.size() - at >= kControlBytes) {
      got.push_back(ControlFrame{.magic = GetU32(in_.data() + at),
                                 .index = static_cast<int>(GetU32(in_.data() + at + 4)),
                                 .info = GetInfo(in_.data() + at + 8)});
      at += kControlBytes;
    }
    in_.erase(in_.begin(), in_.begin() + static_cast<long>(at));
    return got;
  }

 private:
  Socket sock_;
  std::vector<uint8_t> in_, out_;
  size_t wrote_ = 0;
  bool ok_ = true;
};

// ---- the sending side ----

class VerbsSend final : public SendConnection {
 public:
  VerbsSend(std::unique_ptr<QpSet> qps, StripeOptions o, size_t max_outstanding, std::array<uint8_t, 4> peer_host,
            Socket ctl)
      : qps_(std::move(qps)),
        sender_(static_cast<int>(qps_->qps().size()), o),
        max_outstanding_(max_outstanding),
        peer_host_(peer_host),
        ctl_(std::move(ctl)),
        rearm_(qps_->qps().size()) {
    for (const Qp& q : qps_->qps()) {
      if (q.standby) sender_.Park(q.index);
    }
  }

  Result<std::optional<RequestId>> Send(const void* data, size_t size, int tag) override {
    if (!error_.ok()) return error_.error();
    if (msgs_.size() >= max_outstanding_) return std::optional<RequestId>();
    Result<uint64_t> m = sender_.Post(size, tag);
    if (!m.ok()) return m.error();
    msgs_[*m] = Msg{static_cast<const uint8_t*>(data), size};
    Progress();
    return std::optional<RequestId>(*m);
  }

  Result<TestResult> Test(RequestId id) override {
    auto it = msgs_.find(id);
    if (it == msgs_.end()) return InvalidArgument("unknown send request " + std::to_string(id));
    Progress();
    if (sender_.Done(id)) {
      const size_t size = it->second.size;
      msgs_.erase(it);
      return TestResult{.done = true, .size = size};
    }
    if (!error_.ok()) return error_.error();
    return TestResult{};
  }

 private:
  struct Msg {
    const uint8_t* data = nullptr;
    size_t size = 0;
  };

  // Re-creation of failed QPs (see Control): when its path is usable (the
  // agent's word, hold-down included) and its backoff has passed.
  struct Rearm {
    bool pending = false;
    std::chrono::steady_clock::time_point next{}, sent{};
    int backoff_ms = 0;
  };

  void Rearming() {
    using Clock = std::chrono::steady_clock;
    const int base = qps_->devices().config.rearm_after_ms;
    for (const ControlFrame& f : ctl_.Exchange()) {
      if (f.magic != kRearmedMagic || f.index < 0 || f.index >= static_cast<int>(rearm_.size())) continue;
      Rearm& r = rearm_[f.index];
      Qp& q = qps_->qps()[f.index];
      if (!r.pending || q.alive) continue;
      r.pending = false;
      if (Status s = qps_->ConnectOne(f.index, f.info); !s.ok()) {
        qps_->devices().warn("verbs: re-creating " + qps_->Name(f.index) + ": " + s.error().message);
        r.next = Clock::now() + std::chrono::milliseconds(r.backoff_ms);
        continue;
      }
      qps_->SetPeerOne(f.index, f.info);
      q.alive = true;
      sender_.StreamUp(f.index);
      if (q.standby) sender_.Park(f.index);  // Steer decides
      qps_->devices().info("verbs: " + qps_->Name(f.index) + " re-created and re-admitted");
    }
    if (base <= 0 || !ctl_.ok()) return;
    const auto now = Clock::now();
    const auto& path_failed = qps_->devices().config.path_failed;
    for (Qp& q : qps_->qps()) {
      Rearm& r = rearm_[q.index];
      if (q.alive) continue;
      if (r.pending && now - r.sent > std::chrono::seconds(10)) r.pending = false;  // no answer: again
      if (r.pending || now < r.next) continue;
      if (path_failed && path_failed(qps_->Path(q.index, peer_host_))) continue;
      r.sent = now;
      r.next = now + std::chrono::milliseconds(r.backoff_ms);
      if (Status s = qps_->Recreate(q.index); !s.ok()) {
        qps_->devices().warn("verbs: re-creating " + qps_->Name(q.index) + ": " + s.error().message);
        continue;
      }
      r.pending = true;
      ctl_.Queue(ControlFrame{.magic = kRearmMagic, .index = q.index, .info = qps_->Info(q.index)});
    }
    ctl_.Exchange();
  }

  void QpFailed(int i, const std::string& why) {
    Qp& q = qps_->qps()[i];
    if (!q.alive) return;
    q.alive = false;
    {
      // Backoff before re-creating it: the base, doubling while it keeps failing (at most 16x).
      Rearm& r = rearm_[i];
      const int base = qps_->devices().config.rearm_after_ms;
      r.backoff_ms = r.backoff_ms == 0 ? base : std::min(r.backoff_ms * 2, base * 16);
      r.next = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.backoff_ms);
      r.pending = false;
    }
    ++qps_->failovers;
    const size_t requeued = sender_.InFlight(i);
    sender_.StreamDown(i);
    for (Qp& s : qps_->qps()) {
      if (s.standby && s.alive) sender_.Unpark(s.index);
    }
    qps_->devices().warn("verbs: " + qps_->Name(i) + " failed (" + why + "); " + std::to_string(requeued) +
                         " unacknowledged chunks replayed on the " + std::to_string(sender_.StreamsUsable()) +
                         " QPs left");
  }

  // The agent's verdicts: a primary on a failed rail is parked (its chunks
  // move on) and re-admitted after; the standby carries traffic while any
  // primary is down or parked.
  void Steer() {
    const auto& path_failed = qps_->devices().config.path_failed;
    auto& qps = qps_->qps();
    bool need_standby = false;
    for (Qp& q : qps) {
      if (q.standby) continue;
      if (!q.alive) {
        need_standby = true;
        continue;
      }
      const bool failed = path_failed && path_failed(qps_->Path(q.index, peer_host_));
      if (failed && !sender_.IsParked(q.index)) {
        sender_.Park(q.index);
        ++qps_->failovers;
        qps_->devices().info("verbs: " + qps_->Name(q.index) +
                             " parked: its path is reported failed; the standby carries its share");
      } else if (!failed && sender_.IsParked(q.index)) {
        sender_.Unpark(q.index);
        qps_->devices().info("verbs: " + qps_->Name(q.index) + " re-admitted: its path is usable again");
      }
      need_standby = need_standby || failed;
    }
    for (Qp& q : qps) {
      if (!q.standby || !q.alive) continue;
      if (need_standby) {
        sender_.Unpark(q.index);
      } else {
        sender_.Park(q.index);
      }
    }
    if (sender_.StreamsUsable() == 0) {  // every path reported failed: use what is open
      for (Qp& q : qps) {
        if (q.alive) sender_.Unpark(q.index);
      }
    }
  }

  void Progress() {
    if (!error_.ok()) return;
    qps_->Poll([&](const ibv_wc& wc) {
      const int i = WrQp(wc.wr_id);
      Qp& q = qps_->qps()[i];
      if (WrKind(wc.wr_id) == Kind::kSendData) q.free_send.push_back(WrSlot(wc.wr_id));
      if (wc.status != IBV_WC_SUCCESS) {
        QpFailed(i, StatusName(wc.status));
        return;
      }
      if (WrKind(wc.wr_id) != Kind::kRecv) return;
      Result<AckFrame> ack = wc.byte_len == kAckBytes ? DecodeAck(qps_->RecvSlot(i, WrSlot(wc.wr_id)))
                                                      : Result<AckFrame>(Internal("unexpected frame"));
      if (!ack.ok()) {
        error_ = Internal("verbs: " + qps_->Name(i) + ": a frame that is not an ack (" + ack.error().message + ")");
        return;
      }
      if (Status s = sender_.OnAck(*ack); !s.ok()) error_ = s;
      if (Status s = qps_->PostRecv(i, WrSlot(wc.wr_id)); !s.ok()) QpFailed(i, s.error().message);
    });
    if (!error_.ok()) return;
    Rearming();
    Steer();
    // One chunk per QP per round, round robin, while any QP takes one.
    for (bool more = true; more;) {
      more = false;
      for (Qp& q : qps_->qps()) {
        if (!q.alive || q.free_send.empty()) continue;
        std::optional<Chunk> c = sender_.Next(q.index);
        if (!c) continue;
        more = true;
        const uint32_t slot = q.free_send.back();
        q.free_send.pop_back();
        uint8_t* p = qps_->SendSlot(q.index, slot);
        const DataHeader h{.stream = static_cast<uint16_t>(q.index),
                           .len = c->len,
                           .tag = c->tag,
                           .seq = c->seq,
                           .msg = c->msg,
                           .offset = c->offset,
                           .msg_size = c->msg_size,
                           .send_ns = qps_->Stamp()};
        const auto header = EncodeDataHeader(h);
        std::memcpy(p, header.data(), header.size());
        if (c->len > 0) std::memcpy(p + kDataHeaderBytes, msgs_.at(c->msg).data + c->offset, c->len);
        if (Status s = qps_->PostSend(q.index, Kind::kSendData, slot, kDataHeaderBytes + c->len); !s.ok()) {
          q.free_send.push_back(slot);
          QpFailed(q.index, s.error().message);
        } else {
          qps_->Count(q.index, c->len);
        }
      }
    }
    qps_->ReportIfDue(true, [&](int i) -> std::string {
      return !qps_->qps()[i].alive ? "down" : sender_.IsParked(i) ? "parked" : "up";
    });
    if (sender_.StreamsUp() == 0) {
      error_ = Unavailable("verbs: every QP of the connection failed (" + std::to_string(sender_.Unacknowledged()) +
                           " chunks unacknowledged)");
    }
  }

  std::unique_ptr<QpSet> qps_;
  StripeSender sender_;
  size_t max_outstanding_;
  std::array<uint8_t, 4> peer_host_;
  Control ctl_;
  std::vector<Rearm> rearm_;
  std::map<uint64_t, Msg> msgs_;
  Status error_ = Status::Ok();
};

// ---- the receiving side ----

class VerbsRecv final : public RecvConnection {
 public:
  VerbsRecv(std::unique_ptr<QpSet> qps, size_t max_outstanding, Socket ctl)
      : qps_(std::move(qps)),
        max_outstanding_(max_outstanding),
        ack_busy_(qps_->qps().size(), false),
        ctl_(std::move(ctl)) {}

  Result<std::optional<RequestId>> Recv(void* data, size_t capacity, int tag) override {
    if (!error_.ok()) return error_.error();
    if (bufs_.size() >= max_outstanding_) return std::optional<RequestId>();
    const uint64_t m = receiver_.Post(capacity, tag);
    bufs_[m] = static_cast<uint8_t*>(data);
    Progress();
    return std::optional<RequestId>(m);
  }

  Result<TestResult> Test(RequestId id) override {
    auto it = bufs_.find(id);
    if (it == bufs_.end()) return InvalidArgument("unknown receive request " + std::to_string(id));
    Progress();
    // Complete once its bytes are in and an ack covering them is on its way.
    if (receiver_.Complete(id) && ack_posted_.cum_seq > receiver_.LastSeq(id)) {
      const size_t size = receiver_.Size(id);
      receiver_.Release(id);
      bufs_.erase(it);
      return TestResult{.done = true, .size = size};
    }
    if (!error_.ok()) return error_.error();
    return TestResult{};
  }

 private:
  void OnData(int i, uint32_t slot, uint32_t bytes) {
    const uint8_t* p = qps_->RecvSlot(i, slot);
    if (bytes < kDataHeaderBytes) {
      error_ = Internal("verbs: a frame of " + std::to_string(bytes) + " bytes");
      return;
    }
    Result<DataHeader> h = DecodeDataHeader(p);
    if (!h.ok()) {
      error_ = Internal("verbs: " + h.error().message);
      return;
    }
    if (bytes != kDataHeaderBytes + h->len) {
      error_ = Internal("verbs: chunk " + std::to_string(h->seq) + " of " + std::to_string(bytes) + " bytes");
      return;
    }
    qps_->OnStamp(i, h->send_ns);
    Result<Placement> where = receiver_.OnHeader(*h);
    if (!where.ok()) {
      error_ = where.error();
      return;
    }
    if (!where->discard) {
      if (where->len > 0) std::memcpy(bufs_.at(where->msg) + where->offset, p + kDataHeaderBytes, where->len);
      receiver_.OnPayload(*h);
      qps_->Count(i, where->len);
    }
    last_qp_ = i;
  }

  void QpFailed(int i, const std::string& why) {
    Qp& q = qps_->qps()[i];
    if (!q.alive) return;
    q.alive = false;
    ++qps_->failovers;
    qps_->devices().warn("verbs: " + qps_->Name(i) + " failed at the receiver (" + why + ")");
  }

  // The sender re-created a QP: re-create ours, connect it, answer.
  void Rearming() {
    for (const ControlFrame& f : ctl_.Exchange()) {
      if (f.magic != kRearmMagic || f.index < 0 || f.index >= static_cast<int>(ack_busy_.size())) continue;
      if (Status s = qps_->Recreate(f.index); !s.ok()) {
        qps_->devices().warn("verbs: re-creating " + qps_->Name(f.index) + ": " + s.error().message);
        continue;
      }
      if (Status s = qps_->ConnectOne(f.index, f.info); !s.ok()) {
        qps_->devices().warn("verbs: re-creating " + qps_->Name(f.index) + ": " + s.error().message);
        continue;
      }
      qps_->SetPeerOne(f.index, f.info);
      qps_->qps()[f.index].alive = true;
      ack_busy_[f.index] = false;
      ctl_.Queue(ControlFrame{.magic = kRearmedMagic, .index = f.index, .info = qps_->Info(f.index)});
    }
    ctl_.Exchange();
  }

  void SendAck() {
    const AckFrame ack = receiver_.Ack();
    if (!resend_ack_ && ack.cum_seq == ack_posted_.cum_seq && ack.credit == ack_posted_.credit) return;
    const int n = static_cast<int>(qps_->qps().size());
    for (int k = 0; k < n; ++k) {
      const int i = (last_qp_ + k) % n;
      Qp& q = qps_->qps()[i];
      if (!q.alive || ack_busy_[i]) continue;
      const auto bytes = EncodeAck(ack);
      std::memcpy(qps_->SendSlot(i, 0), bytes.data(), bytes.size());
      if (Status s = qps_->PostSend(i, Kind::kSendAck, 0, bytes.size()); !s.ok()) {
        QpFailed(i, s.error().message);
        continue;
      }
      ack_busy_[i] = true;
      ack_posted_ = ack;
      resend_ack_ = false;
      return;
    }
  }

  void Progress() {
    if (!error_.ok()) return;
    qps_->Poll([&](const ibv_wc& wc) {
      const int i = WrQp(wc.wr_id);
      if (WrKind(wc.wr_id) == Kind::kSendAck) ack_busy_[i] = false;
      if (wc.status != IBV_WC_SUCCESS) {
        // An ack that did not make it is sent again (on another QP).
        if (WrKind(wc.wr_id) == Kind::kSendAck) resend_ack_ = true;
        QpFailed(i, StatusName(wc.status));
        return;
      }
      if (WrKind(wc.wr_id) != Kind::kRecv || !error_.ok()) return;
      OnData(i, WrSlot(wc.wr_id), wc.byte_len);
      if (Status s = qps_->PostRecv(i, WrSlot(wc.wr_id)); !s.ok()) QpFailed(i, s.error().message);
    });
    if (!error_.ok()) return;
    Rearming();
    SendAck();
    qps_->ReportIfDue(false, [&](int i) -> std::string { return qps_->qps()[i].alive ? "up" : "down"; });
    bool any = false;
    for (const Qp& q : qps_->qps()) any = any || q.alive;
    if (!any) error_ = Unavailable("verbs: every QP of the connection failed");
  }

  std::unique_ptr<QpSet> qps_;
  StripeReceiver receiver_;
  size_t max_outstanding_;
  std::map<uint64_t, uint8_t*> bufs_;
  std::vector<bool> ack_busy_;
  AckFrame ack_posted_{};
  bool resend_ack_ = false;  // the last ack sent failed: send it again
  Control ctl_;
  int last_qp_ = 0;
  Status error_ = Status::Ok();
};

// ---- setup ----

// The connector's request (after qps.SetIdentity: it carries the connection id).
std::vector<uint8_t> RequestBytes(uint64_t token, bool standby, const QpSet& qps, int n) {
  std::vector<uint8_t> b(kRequestHead + kQpInfoBytes * n, 0);
  PutU32(b.data(), kRequestMagic);
  PutU32(b.data() + 4, standby ? 1 : 0);
  PutU64(b.data() + 8, token);
  PutU64(b.data() + 24, qps.conn_id());
  PutU16(b.data() + 16, static_cast<uint16_t>(n));
  for (int i = 0; i < n; ++i) PutInfo(b.data() + kRequestHead + kQpInfoBytes * i, qps.Info(i));
  PutU32(b.data() + 20, Checksum32(b.data() + kRequestHead, b.size() - kRequestHead));
  return b;
}

class VerbsPending final : public PendingConnection {
 public:
  VerbsPending(std::shared_ptr<VerbsShared> d, ListenHandle h, std::unique_ptr<QpSet> qps, Socket s, int n)
      : d_(std::move(d)), qps_(std::move(qps)), sock_(std::move(s)), n_(n), host_(h.host) {
    qps_->SetIdentity(d_->rng(), host_);
    out_ = RequestBytes(h.token, d_->config.standby, *qps_, n_);
  }

  Result<std::unique_ptr<SendConnection>> Poll() override {
    std::string err;
    if (!WriteSome(sock_.get(), out_, &wrote_, &err)) return Unavailable("verbs: QP exchange: " + err);
    if (wrote_ < out_.size()) return std::unique_ptr<SendConnection>();
    const size_t want = kReplyHead + kQpInfoBytes * n_;
    if (!ReadSome(sock_.get(), &in_, want, &err)) {
      return Unavailable("verbs: QP exchange: " + err +
                         (in_.empty() ? " before answering (a sockets-transport listener? every rank needs the same "
                                        "LOCKSTEP_NCCL_TRANSPORT)"
                                      : ""));
    }
    if (in_.size() < kReplyHead) return std::unique_ptr<SendConnection>();
    if (GetU32(in_.data()) != kReplyMagic) {
      return InvalidArgument(
          "verbs: the listener does not speak the verbs QP exchange (a sockets-transport listener? every rank "
          "needs the same LOCKSTEP_NCCL_TRANSPORT)");
    }
    if (GetU16(in_.data() + 4) != n_) return Internal("verbs: the listener answered with a different QP count");
    if (in_.size() < want) return std::unique_ptr<SendConnection>();
    if (GetU32(in_.data() + 20) != Checksum32(in_.data() + kReplyHead, want - kReplyHead)) {
      return Internal("verbs: QP exchange reply checksum mismatch");
    }
    const uint32_t slots = GetU32(in_.data() + 8);
    const uint32_t slot_bytes = GetU32(in_.data() + 12);
    std::vector<QpInfo> peer;
    for (int i = 0; i < n_; ++i) peer.push_back(GetInfo(in_.data() + kReplyHead + kQpInfoBytes * i));
    if (Status s = qps_->Connect(peer); !s.ok()) return s.error();
    qps_->SetPeer(std::move(peer));
    StripeOptions o = d_->config.stripe;
    o.window_per_stream = std::max<uint32_t>(1, std::min(o.window_per_stream, slots));
    o.chunk_bytes = std::max<uint32_t>(1, std::min(o.chunk_bytes, slot_bytes));
    return std::unique_ptr<SendConnection>(
        std::make_unique<VerbsSend>(std::move(qps_), o, d_->config.max_outstanding, host_, std::move(sock_)));
  }

 private:
  std::shared_ptr<VerbsShared> d_;
  std::unique_ptr<QpSet> qps_;
  Socket sock_;
  int n_;
  std::array<uint8_t, 4> host_;
  std::vector<uint8_t> out_, in_;
  size_t wrote_ = 0;
};

class VerbsListener final : public Listener {
 public:
  VerbsListener(std::shared_ptr<VerbsShared> d, Socket s, uint64_t token)
      : d_(std::move(d)), sock_(std::move(s)), token_(token) {}

  Result<std::unique_ptr<RecvConnection>> Accept() override {
    for (;;) {
      const int fd = ::accept4(sock_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (peers_.size() >= 64) {
        ::close(fd);
        continue;
      }
      Peer p;
      p.sock = Socket(fd);
      peers_.push_back(std::move(p));
    }
    for (auto it = peers_.begin(); it != peers_.end();) {
      Result<std::unique_ptr<RecvConnection>> c = Step(*it);
      if (!c.ok()) {
        d_->warn("verbs: a peer's QP exchange failed: " + c.error().message);
        it = peers_.erase(it);
        continue;
      }
      if (*c) {
        peers_.erase(it);
        return c;
      }
      ++it;
    }
    return std::unique_ptr<RecvConnection>();
  }

 private:
  struct Peer {
    Socket sock;
    std::vector<uint8_t> in, out;
    size_t wrote = 0;
    std::unique_ptr<QpSet> qps;
  };

  Result<std::unique_ptr<RecvConnection>> Step(Peer& p) {
    std::string err;
    if (!p.qps) {
      if (!ReadSome(p.sock.get(), &p.in, kRequestHead, &err)) return Unavailable(err);
      if (p.in.size() < kRequestHead) return std::unique_ptr<RecvConnection>();
      if (GetU32(p.in.data()) != kRequestMagic) {
        return InvalidArgument(
            "not a verbs QP exchange (a sockets-transport connector? every rank needs the same "
            "LOCKSTEP_NCCL_TRANSPORT)");
      }
      if (GetU64(p.in.data() + 8) != token_) return InvalidArgument("a QP exchange for another listener");
      const int n = GetU16(p.in.data() + 16);
      if (n < 1 || n > static_cast<int>(kMaxRails) + 1) return InvalidArgument(std::to_string(n) + " QPs");
      const size_t want = kRequestHead + kQpInfoBytes * n;
      if (!ReadSome(p.sock.get(), &p.in, want, &err)) return Unavailable(err);
      if (p.in.size() < want) return std::unique_ptr<RecvConnection>();
      if (GetU32(p.in.data() + 20) != Checksum32(p.in.data() + kRequestHead, want - kRequestHead)) {
        return Internal("QP exchange checksum mismatch");
      }
      const bool standby = GetU32(p.in.data() + 4) == 1;
      const StripeOptions& o = d_->config.stripe;
      auto qps = std::make_unique<QpSet>(d_);
      if (Status s = qps->Create(n, standby, 1, kAckBytes, static_cast<int>(o.window_per_stream),
                                 kDataHeaderBytes + o.chunk_bytes);
          !s.ok()) {
        return s.error();
      }
      std::vector<QpInfo> peer;
      for (int i = 0; i < n; ++i) peer.push_back(GetInfo(p.in.data() + kRequestHead + kQpInfoBytes * i));
      if (Status s = qps->Connect(peer); !s.ok()) return s.error();
      qps->SetIdentity(GetU64(p.in.data() + 24), {});  // the connector's host is not in its request
      qps->SetPeer(std::move(peer));
      p.out.assign(kReplyHead + kQpInfoBytes * n, 0);
      PutU32(p.out.data(), kReplyMagic);
      PutU16(p.out.data() + 4, static_cast<uint16_t>(n));
      PutU32(p.out.data() + 8, o.window_per_stream);
      PutU32(p.out.data() + 12, o.chunk_bytes);
      for (int i = 0; i < n; ++i) PutInfo(p.out.data() + kReplyHead + kQpInfoBytes * i, qps->Info(i));
      PutU32(p.out.data() + 20, Checksum32(p.out.data() + kReplyHead, p.out.size() - kReplyHead));
      p.qps = std::move(qps);
    }
    if (!WriteSome(p.sock.get(), p.out, &p.wrote, &err)) return Unavailable(err);
    if (p.wrote < p.out.size()) return std::unique_ptr<RecvConnection>();
    return std::unique_ptr<RecvConnection>(
        std::make_unique<VerbsRecv>(std::move(p.qps), d_->config.max_outstanding, std::move(p.sock)));
  }

  std::shared_ptr<VerbsShared> d_;
  Socket sock_;
  uint64_t token_;
  std::deque<Peer> peers_;
};

class VerbsTransport final : public Transport {
 public:
  explicit VerbsTransport(std::shared_ptr<VerbsShared> d) : d_(std::move(d)) {}

  int Devices() const override { return 1; }

  DeviceProperties Properties(int) const override {
    DeviceProperties p;
    p.name = "lockstep-verbs[";
    for (size_t i = 0; i < d_->rails.size(); ++i) p.name += (i ? "+" : "") + d_->rails[i].name;
    p.name += "]";
    p.rails = static_cast<int>(d_->rails.size());
    p.streams = p.rails + (d_->config.standby ? 1 : 0);
    p.speed_mbps = d_->config.rail_speed_mbps * p.rails;
    p.guid = 0x4c4b5600000000ull;
    return p;
  }

  Result<std::unique_ptr<Listener>> Listen(int, uint8_t* handle) override {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.get() < 0) return Unavailable(Errno("verbs: socket"));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, d_->config.bootstrap_ipv4.data(), 4);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return Unavailable(Errno("verbs: bind"));
    if (::listen(s.get(), 64) != 0) return Unavailable(Errno("verbs: listen"));
    socklen_t len = sizeof a;
    ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
    ListenHandle h;
    h.token = d_->rng() | 1;
    h.rails.push_back(RailEndpoint{.ipv4 = d_->config.bootstrap_ipv4, .port = ntohs(a.sin_port)});
    if (d_->config.host) h.host = d_->config.host();
    EncodeHandle(h, handle);
    return std::unique_ptr<Listener>(std::make_unique<VerbsListener>(d_, std::move(s), h.token));
  }

  Result<std::unique_ptr<PendingConnection>> Connect(int, const uint8_t* handle) override {
    Result<ListenHandle> h = DecodeHandle(handle);
    if (!h.ok()) return h.error();
    const int n = static_cast<int>(d_->rails.size()) + (d_->config.standby ? 1 : 0);
    auto qps = std::make_unique<QpSet>(d_);
    const StripeOptions& o = d_->config.stripe;
    if (Status s = qps->Create(n, d_->config.standby, static_cast<int>(o.window_per_stream),
                               kDataHeaderBytes + o.chunk_bytes, kAckSlots, kAckBytes);
        !s.ok()) {
      return s.error();
    }
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.get() < 0) return Unavailable(Errno("verbs: socket"));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, h->rails[0].ipv4.data(), 4);
    a.sin_port = htons(h->rails[0].port);
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
      return Unavailable(Errno("verbs: connect to the listener's QP exchange"));
    }
    return std::unique_ptr<PendingConnection>(std::make_unique<VerbsPending>(d_, *h, std::move(qps), std::move(s), n));
  }

 private:
  std::shared_ptr<VerbsShared> d_;
};

Result<int> ParseInt(const char* name, const char* v, int lo, int hi, int def) {
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    return InvalidArgument(std::string(name) + "=" + v + ": expected an integer in " + std::to_string(lo) + ".." +
                           std::to_string(hi));
  }
  return static_cast<int>(x);
}

}  // namespace

Result<VerbsTransportConfig> VerbsConfigFromEnv(const std::function<const char*(const char*)>& env) {
  VerbsTransportConfig c;
  Result<int> gid = ParseInt("LOCKSTEP_NCCL_VERBS_GID_INDEX", env("LOCKSTEP_NCCL_VERBS_GID_INDEX"), 0, 255, 0);
  if (!gid.ok()) return gid.error();
  c.gid_index = *gid;
  Result<int> standby = ParseInt("LOCKSTEP_NCCL_VERBS_STANDBY", env("LOCKSTEP_NCCL_VERBS_STANDBY"), 0, 1, 1);
  if (!standby.ok()) return standby.error();
  c.standby = *standby == 1;
  Result<int> rearm = ParseInt("LOCKSTEP_NCCL_VERBS_REARM_MS", env("LOCKSTEP_NCCL_VERBS_REARM_MS"), 0, 600000, 1000);
  if (!rearm.ok()) return rearm.error();
  c.rearm_after_ms = *rearm;
  if (const char* v = env("LOCKSTEP_NCCL_VERBS_DEVICES"); v != nullptr && *v != '\0') {
    std::string s = v;
    size_t at = 0;
    while (at <= s.size()) {
      const size_t comma = std::min(s.find(',', at), s.size());
      const std::string item = s.substr(at, comma - at);
      at = comma + 1;
      const size_t colon = item.find(':');
      VerbsRailSpec r{.device = item.substr(0, colon)};
      if (colon != std::string::npos) {
        Result<int> port = ParseInt("LOCKSTEP_NCCL_VERBS_DEVICES", item.substr(colon + 1).c_str(), 1, 255, 1);
        if (!port.ok() || item.substr(colon + 1).empty()) {
          return InvalidArgument(std::string("LOCKSTEP_NCCL_VERBS_DEVICES=") + v + ": '" + item +
                                 "' is not DEVICE[:PORT] with PORT in 1..255");
        }
        r.port = *port;
      }
      if (r.device.empty()) {
        return InvalidArgument(std::string("LOCKSTEP_NCCL_VERBS_DEVICES=") + v + ": an empty device name");
      }
      c.rails.push_back(r);
    }
    if (c.rails.size() > kMaxRails) {
      return InvalidArgument(std::string("LOCKSTEP_NCCL_VERBS_DEVICES=") + v + ": at most " +
                             std::to_string(kMaxRails) + " rails");
    }
  }
  return c;
}

Result<std::unique_ptr<Transport>> MakeVerbsTransport(const VerbsApi& api, VerbsTransportConfig config, WarnFn warn) {
  if (Status s = ValidateStripeOptions(config.stripe, static_cast<int>(kMaxRails) + 1); !s.ok()) return s.error();
  auto d = std::make_shared<VerbsShared>();
  d->api = api;
  d->warn = warn ? std::move(warn) : [](const std::string&) {};
  d->info = config.info ? config.info : d->warn;
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list) api.free_device_list(list);
    return Unavailable("no RDMA device: " + api.source +
                       " is loaded but lists no device (no RDMA NIC, or its kernel driver and ib_uverbs are not "
                       "loaded; /dev/infiniband is empty)");
  }
  std::map<std::string, ibv_device*> by_name;
  std::string names;
  for (int i = 0; i < n; ++i) {
    by_name[api.get_device_name(list[i])] = list[i];
    names += (names.empty() ? "" : ", ") + std::string(api.get_device_name(list[i]));
  }
  if (config.rails.empty()) {
    for (int i = 0; i < n && i < static_cast<int>(kMaxRails); ++i) {
      config.rails.push_back({.device = api.get_device_name(list[i]), .port = 1});
    }
  }
  Status status = Status::Ok();
  for (const VerbsRailSpec& spec : config.rails) {
    RailDevice r;
    r.name = spec.device + ":" + std::to_string(spec.port);
    r.port = static_cast<uint8_t>(spec.port);
    auto it = by_name.find(spec.device);
    if (it == by_name.end()) {
      status = Unavailable("no RDMA device: " + spec.device + " not found (devices: " + names + ")");
      break;
    }
    r.ctx = api.open_device(it->second);
    if (r.ctx == nullptr) {
      status = Unavailable(Errno(("no RDMA device: ibv_open_device(" + spec.device + ")").c_str()));
      break;
    }
    d->rails.push_back(r);
    RailDevice& rr = d->rails.back();
    ibv_port_attr pa{};
    if (int e = api.query_port(rr.ctx, rr.port, &pa)) {
      status = Unavailable("no RDMA device: " + rr.name + ": ibv_query_port: " + std::strerror(e));
      break;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      status = Unavailable("no RDMA device: " + rr.name + " is not active (state " + std::to_string(pa.state) + ")");
      break;
    }
    rr.lid = pa.lid;
    rr.mtu = pa.active_mtu;
    rr.global = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (api.query_gid(rr.ctx, rr.port, config.gid_index, &rr.gid) != 0) {
      status = Unavailable("no RDMA device: " + rr.name + " has no GID at index " + std::to_string(config.gid_index) +
                           " (LOCKSTEP_NCCL_VERBS_GID_INDEX)");
      break;
    }
    rr.pd = api.alloc_pd(rr.ctx);
    if (rr.pd == nullptr) {
      status = Unavailable(Errno(("ibv_alloc_pd on " + rr.name).c_str()));
      break;
    }
  }
  api.free_device_list(list);
  d->config = std::move(config);
  if (!status.ok()) return status.error();  // ~VerbsShared closes what was opened
  return std::unique_ptr<Transport>(std::make_unique<VerbsTransport>(std::move(d)));
}

}  // namespace lockstep::nccl
