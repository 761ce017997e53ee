#include "socket_connections.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace lockstep::nccl {

namespace {

constexpr size_t kScratchBytes = 64 * 1024;

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

std::string StreamsLeft(int up, size_t total) {
  return std::to_string(up) + " of " + std::to_string(total) + " streams left";
}

template <typename T>
T At(const std::vector<T>& v, size_t i) {
  return i < v.size() ? v[i] : T{};
}

std::string PathName(const ConnIdentity& who, int s) {
  return Ipv4String(At(who.local, static_cast<size_t>(s))) + " -> " +
         Ipv4String(At(who.remote, static_cast<size_t>(s)));
}

// The state the agent gives the path of `rail` to `peer` ("down", "recovering", ...).
std::string PathState(const AgentState& st, const Ipv4& rail, const Ipv4& peer) {
  for (const AgentPath& p : st.paths) {
    if (p.rail == rail && p.peer == peer && !p.usable) return p.state;
  }
  return "unknown";
}

}  // namespace

// ---- sender ----

SocketSendConnection::SocketSendConnection(std::vector<Fd> fds, StripeOptions options, size_t max_outstanding,
                                           WarnFn warn, ConnIdentity who, TrafficControlOptions tc, int ack_timeout_ms)
    : sender_(static_cast<int>(fds.size()), options),
      options_(options),
      who_(std::move(who)),
      tc_(static_cast<int>(fds.size()), tc),
      ack_timeout_ms_(ack_timeout_ms),
      stalled_(fds.size(), false),
      in_flight_since_(fds.size(), 0),
      owd_(fds.size()),
      last_owd_(fds.size()),
      bytes_(fds.size(), 0),
      chunks_(fds.size(), 0),
      max_outstanding_(max_outstanding),
      warn_(std::move(warn)) {
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = std::move(fds[i]);
}

SocketSendConnection::~SocketSendConnection() {
  if (who_.agent) who_.agent->Close(who_.id, true);
}

bool SocketSendConnection::CheckStalls(int64_t now) {
  if (ack_timeout_ms_ <= 0 || now < next_stall_check_ns_) return false;
  next_stall_check_ns_ = now + kStallCheckEveryNs;
  bool changed = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    bool stalled = false;
    if (streams_[i].fd.valid()) {
      tcp_info ti{};
      socklen_t len = sizeof ti;
      if (::getsockopt(streams_[i].fd.get(), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
        // Data waiting counts as well as data sent: with its rail's device
        // down (carrier loss) a stream's bytes are never sent at all.
        int unsent = 0;
        if (ti.tcpi_unacked == 0 && ::ioctl(streams_[i].fd.get(), SIOCOUTQNSD, &unsent) == 0 && unsent > 0) {
          ti.tcpi_unacked = 1;
        }
        if (ti.tcpi_unacked == 0) {
          in_flight_since_[i] = 0;
        } else if (in_flight_since_[i] == 0) {
          in_flight_since_[i] = now;
        }
        const int64_t in_flight_ms = in_flight_since_[i] == 0 ? 0 : (now - in_flight_since_[i]) / 1'000'000;
        stalled =
            AckStalled(ti.tcpi_unacked, in_flight_ms, ti.tcpi_last_ack_recv, static_cast<uint32_t>(ack_timeout_ms_));
      }
    }
    if (stalled != stalled_[i]) {
      stalled_[i] = stalled;
      changed = true;
    }
  }
  return changed;
}

void SocketSendConnection::Gate() {
  AgentLink* agent = who_.agent.get();
  const int n = static_cast<int>(streams_.size());
  std::shared_ptr<const AgentState> st = agent ? agent->State() : nullptr;
  std::vector<bool> open(n), verdict(n, true);
  for (int i = 0; i < n; ++i) {
    open[i] = streams_[i].fd.valid();
    if (st && who_.peer_host != Ipv4{}) {
      verdict[i] = st->Usable(At(who_.local, static_cast<size_t>(i)), who_.peer_host).value_or(true);
    }
    verdict[i] = verdict[i] && !stalled_[i];
  }
  const std::vector<bool> use = UsableStreams(open, verdict);
  auto say = [&](const std::string& m) {
    if (agent) {
      agent->Info(m);
    } else if (warn_) {
      warn_(m);
    }
  };
  for (int i = 0; i < n; ++i) {
    if (!open[i]) continue;
    if (!use[i] && !sender_.IsParked(i)) {
      sender_.Park(i);
      ++failovers_;
      const std::string why =
          stalled_[i] ? "no TCP acknowledgement for " + std::to_string(ack_timeout_ms_) + " ms with data in flight"
                      : "the node agent says its path to " + Ipv4String(who_.peer_host) + " is " +
                            PathState(*st, At(who_.local, static_cast<size_t>(i)), who_.peer_host);
      say("send stream " + std::to_string(i) + " (" + PathName(who_, i) + ") parked: " + why +
          "; its unacknowledged chunks move to the other streams");
    } else if (use[i] && sender_.IsParked(i)) {
      sender_.Unpark(i);
      say("send stream " + std::to_string(i) + " (" + PathName(who_, i) +
          ") re-admitted: its path is usable again (the node agent's verdict, TCP acknowledgements)");
    }
  }
}

void SocketSendConnection::Steer() {
  AgentLink* agent = who_.agent.get();
  if (agent != nullptr) agent->Poll();
  const int64_t now = RawNowNs();
  // The agent's verdicts (fabric/'s path states and hold-down) and the
  // streams' own missing acks park and re-admit streams.
  const bool stalls_changed = CheckStalls(now);
  const bool agent_changed = agent != nullptr && agent->generation() != agent_gen_;
  if (agent_changed) agent_gen_ = agent->generation();
  if (stalls_changed || agent_changed || regate_) {
    regate_ = false;
    Gate();
  }
  if (agent == nullptr) return;
  const int n = static_cast<int>(streams_.size());
  if (now >= next_tc_ns_) {
    next_tc_ns_ = now + kTrafficControlEveryNs;
    for (const WeightChange& c : tc_.Update(owd_)) {
      sender_.SetLimit(c.stream, WeightedWindow(options_.window_per_stream, tc_.Weight(c.stream)));
      agent->Info("send stream " + std::to_string(c.stream) + " (" + PathName(who_, c.stream) + ") " +
                  (c.contended ? "contended" : "no longer contended") + ": one-way delay " +
                  std::to_string(c.delay_ns / 1000) + " us against its baseline " +
                  std::to_string(c.baseline_ns / 1000) + " us; window " + std::to_string(sender_.Limit(c.stream)) +
                  " of " + std::to_string(options_.window_per_stream));
    }
    std::fill(owd_.begin(), owd_.end(), std::nullopt);
  }
  if (now >= next_report_ns_) {
    next_report_ns_ = now + kReportEveryNs;
    std::vector<StreamReport> reports;
    for (int i = 0; i < n; ++i) {
      const bool up = streams_[i].fd.valid();
      reports.push_back(StreamReport{.conn = who_.id,
                                     .send = true,
                                     .stream = i,
                                     .rail = At(who_.local, static_cast<size_t>(i)),
                                     .remote = At(who_.remote, static_cast<size_t>(i)),
                                     .peer = who_.peer_host,
                                     .bytes = bytes_[i],
                                     .chunks = chunks_[i],
                                     .owd_p50_ns = last_owd_[i],
                                     .owd_p99_ns = std::nullopt,
                                     .failovers = failovers_,
                                     .rebalances = tc_.rebalances(),
                                     .state = !up                   ? "down"
                                              : sender_.IsParked(i) ? "parked"
                                              : tc_.Contended(i)    ? "contended"
                                                                    : "up"});
    }
    agent->Report(who_.id, true, std::move(reports));
  }
}

Result<std::optional<RequestId>> SocketSendConnection::Send(const void* data, size_t size, int tag) {
  if (open_ >= max_outstanding_) return std::optional<RequestId>();
  if (size > 0 && data == nullptr) return InvalidArgument("isend of " + std::to_string(size) + " bytes from null");
  Result<uint64_t> id = sender_.Post(size, tag);
  if (!id.ok()) return id.error();
  msgs_.push_back(Message{.data = static_cast<const uint8_t*>(data), .size = size});
  ++open_;
  if (Status s = Progress(); !s.ok()) return s.error();
  return std::optional<RequestId>(*id);
}

Result<TestResult> SocketSendConnection::Test(RequestId id) {
  if (id < msgs_base_ || id - msgs_base_ >= msgs_.size() || msgs_[id - msgs_base_].reported) {
    return InvalidArgument("test of send request " + std::to_string(id) + " which is not outstanding");
  }
  // A peer that closes once it has acknowledged everything (the end of a job)
  // is not an error for messages already delivered.
  const Status progress = Progress();
  Message& m = msgs_[id - msgs_base_];
  if (!sender_.Done(id)) {
    if (!progress.ok()) return progress.error();
    return TestResult{};
  }
  TestResult r{.done = true, .size = m.size};
  m.reported = true;
  --open_;
  while (!msgs_.empty() && msgs_.front().reported && sender_.Done(msgs_base_)) {
    msgs_.pop_front();
    ++msgs_base_;
  }
  return r;
}

Status SocketSendConnection::Progress() {
  for (int s = 0; s < static_cast<int>(streams_.size()); ++s) {
    if (!streams_[s].fd.valid()) continue;
    if (Status st = ReadAcks(s); !st.ok()) return st;
  }
  Steer();
  // Chunks go out one per stream per round, round robin, while any stream
  // can write: each stream gets a share, and a stream whose socket fills
  // (a slower path) stops taking, so faster paths carry more. (Filling one
  // stream's window first left the others idle: with NCCL's 8 outstanding
  // messages of one chunk each, stream 0 took them all.)
  const int n = static_cast<int>(streams_.size());
  for (bool more = true; more;) {
    more = false;
    for (int k = 0; k < n; ++k) {
      const int s = (rr_ + k) % n;
      if (streams_[s].fd.valid() && WriteChunk(s)) more = true;
    }
  }
  rr_ = (rr_ + 1) % n;
  if (sender_.StreamsUp() == 0) {
    return Unavailable("every stream of the connection failed (last: " + last_error_ + ")");
  }
  return Status::Ok();
}

Status SocketSendConnection::ReadAcks(int s) {
  Stream& st = streams_[s];
  while (true) {
    ssize_t n = ::recv(st.fd.get(), st.ack.data() + st.ack_off, kAckBytes - st.ack_off, MSG_DONTWAIT);
    if (n > 0) {
      st.ack_off += static_cast<size_t>(n);
      if (st.ack_off < kAckBytes) continue;
      st.ack_off = 0;
      Result<AckFrame> ack = DecodeAck(st.ack.data());
      if (!ack.ok()) {
        Fail(s, ack.error().message);
        return Status::Ok();
      }
      if (Status a = sender_.OnAck(*ack); !a.ok()) return a;
      if (ack->has_owd && ack->owd_stream < streams_.size() && !sender_.IsParked(ack->owd_stream)) {
        owd_[ack->owd_stream] = ack->owd_ns;
        last_owd_[ack->owd_stream] = ack->owd_ns;
      }
      continue;
    }
    if (n == 0) {
      Fail(s, "closed by the peer");
    } else if (errno == EINTR) {
      continue;
    } else if (!WouldBlock(errno)) {
      Fail(s, std::strerror(errno));
    }
    return Status::Ok();
  }
}

bool SocketSendConnection::WriteChunk(int s) {
  Stream& st = streams_[s];
  bool took = false;
  while (true) {
    if (!st.writing) {
      if (took) return true;  // one new chunk per call
      std::optional<Chunk> c = sender_.Next(s);
      if (!c) return false;
      took = true;
      st.hdr = EncodeDataHeader(DataHeader{.stream = static_cast<uint16_t>(s),
                                           .len = c->len,
                                           .tag = c->tag,
                                           .seq = c->seq,
                                           .msg = c->msg,
                                           .offset = c->offset,
                                           .msg_size = c->msg_size,
                                           .send_ns = who_.agent ? who_.agent->FabricNowNs() : 0});
      st.hdr_off = 0;
      st.payload = msgs_[c->msg - msgs_base_].data + c->offset;
      st.len = c->len;
      st.off = 0;
      st.writing = true;
    }
    iovec iov[2];
    int iovcnt = 0;
    if (st.hdr_off < kDataHeaderBytes) { iov[iovcnt++] = {st.hdr.data() + st.hdr_off, kDataHeaderBytes - st.hdr_off}; }
    if (st.off < st.len) iov[iovcnt++] = {const_cast<uint8_t*>(st.payload + st.off), st.len - st.off};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::sendmsg(st.fd.get(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!WouldBlock(errno)) Fail(s, std::strerror(errno));
      return false;
    }
    size_t left = static_cast<size_t>(n);
    const size_t h = std::min(left, kDataHeaderBytes - st.hdr_off);
    st.hdr_off += h;
    st.off += left - h;
    if (st.hdr_off == kDataHeaderBytes && st.off == st.len) {
      st.writing = false;
      bytes_[s] += st.len;
      ++chunks_[s];
      continue;
    }
    return false;  // partial write: the socket buffer is full
  }
}

void SocketSendConnection::Fail(int s, const std::string& why) {
  Stream& st = streams_[s];
  st.fd.Reset();
  st.writing = false;
  sender_.StreamDown(s);
  ++failovers_;
  regate_ = true;  // gate the streams again: the ones left may all be parked
  last_error_ = "stream " + std::to_string(s) + ": " + why;
  if (warn_) {
    warn_("send stream " + std::to_string(s) + " failed (" + why + "); moving its unacknowledged chunks, " +
          StreamsLeft(sender_.StreamsUp(), streams_.size()));
  }
}

// ---- receiver ----

SocketRecvConnection::SocketRecvConnection(std::vector<Fd> fds, size_t max_outstanding, WarnFn warn, ConnIdentity who)
    : who_(std::move(who)),
      delays_(fds.size()),
      delay_at_(fds.size(), 0),
      bytes_(fds.size(), 0),
      chunks_(fds.size(), 0),
      max_outstanding_(max_outstanding),
      warn_(std::move(warn)),
      scratch_(kScratchBytes) {
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = std::move(fds[i]);
}

SocketRecvConnection::~SocketRecvConnection() {
  if (who_.agent) who_.agent->Close(who_.id, false);
}

void SocketRecvConnection::ReportIfDue() {
  AgentLink* agent = who_.agent.get();
  if (agent == nullptr) return;
  agent->Poll();
  const int64_t now = RawNowNs();
  if (now < next_report_ns_) return;
  next_report_ns_ = now + kReportEveryNs;
  std::vector<StreamReport> reports;
  for (size_t i = 0; i < streams_.size(); ++i) {
    reports.push_back(StreamReport{.conn = who_.id,
                                   .send = false,
                                   .stream = static_cast<int>(i),
                                   .rail = At(who_.local, i),
                                   .remote = At(who_.remote, i),
                                   .peer = who_.peer_host,
                                   .bytes = bytes_[i],
                                   .chunks = chunks_[i],
                                   .owd_p50_ns = delays_[i].Percentile(0.5),
                                   .owd_p99_ns = delays_[i].Percentile(0.99),
                                   .failovers = failovers_,
                                   .rebalances = 0,
                                   .state = streams_[i].fd.valid() ? "up" : "down"});
  }
  agent->Report(who_.id, false, std::move(reports));
}

Result<std::optional<RequestId>> SocketRecvConnection::Recv(void* data, size_t capacity, int tag) {
  if (open_ >= max_outstanding_) return std::optional<RequestId>();
  if (capacity > 0 && data == nullptr) return InvalidArgument("irecv of " + std::to_string(capacity) + " into null");
  const uint64_t id = receiver_.Post(capacity, tag);
  msgs_.push_back(Message{.data = static_cast<uint8_t*>(data)});
  ++open_;
  ack_dirty_ = true;  // the credit grew
  if (Status s = Progress(); !s.ok()) return s.error();
  return std::optional<RequestId>(id);
}

Result<TestResult> SocketRecvConnection::Test(RequestId id) {
  if (id < msgs_base_ || id - msgs_base_ >= msgs_.size() || msgs_[id - msgs_base_].reported) {
    return InvalidArgument("test of receive request " + std::to_string(id) + " which is not outstanding");
  }
  const Status progress = Progress();
  // Done once every byte is here and an ack covering it has been written, so
  // the sender completes even if NCCL never calls this connection again. With
  // every stream gone there is nobody left to ack: complete is enough (the
  // sender closed after its acks, or it is gone).
  const bool complete = receiver_.Complete(id);
  if (!complete && !progress.ok()) return progress.error();
  if (!complete || (progress.ok() && receiver_.LastSeq(id) >= ack_written_cum_)) return TestResult{};
  TestResult r{.done = true, .size = receiver_.Size(id)};
  msgs_[id - msgs_base_].reported = true;
  receiver_.Release(id);
  --open_;
  while (!msgs_.empty() && msgs_.front().reported) {
    msgs_.pop_front();
    ++msgs_base_;
  }
  return r;
}

Status SocketRecvConnection::Progress() {
  for (int s = 0; s < static_cast<int>(streams_.size()); ++s) {
    if (!streams_[s].fd.valid()) continue;
    if (Status st = ReadChunks(s); !st.ok()) return st;
  }
  FlushAcks();
  ReportIfDue();
  const bool any = std::any_of(streams_.begin(), streams_.end(), [](const Stream& st) { return st.fd.valid(); });
  if (!any) return Unavailable("every stream of the connection failed (last: " + last_error_ + ")");
  return Status::Ok();
}

Status SocketRecvConnection::ReadChunks(int s) {
  Stream& st = streams_[s];
  while (st.fd.valid()) {
    ssize_t n;
    if (!st.in_payload) {
      n = ::recv(st.fd.get(), st.hdr.data() + st.hdr_off, kDataHeaderBytes - st.hdr_off, MSG_DONTWAIT);
      if (n > 0) {
        st.hdr_off += static_cast<size_t>(n);
        if (st.hdr_off < kDataHeaderBytes) continue;
        st.hdr_off = 0;
        Result<DataHeader> h = DecodeDataHeader(st.hdr.data());
        if (!h.ok()) {
          Fail(s, h.error().message);
          return Status::Ok();
        }
        Result<Placement> p = receiver_.OnHeader(*h);
        if (!p.ok()) return p.error();
        if (h->send_ns != 0 && who_.agent) {
          // In-band one-way delay: the header's arrival in fabric time less its stamp.
          if (const uint64_t now = who_.agent->FabricNowNs(); now != 0) {
            delays_[s].Add(static_cast<int64_t>(now - h->send_ns));
            delay_at_[s] = RawNowNs();
          }
        }
        st.h = *h;
        st.place = *p;
        st.poff = 0;
        st.in_payload = true;
      }
    } else {
      uint8_t* dest;
      size_t want = st.h.len - st.poff;
      // Another copy of this chunk (a retransmit) may have completed first and
      // NCCL may already own the buffer again: read the rest into scratch.
      if (!st.place.discard && (receiver_.Has(st.h.seq) || st.place.msg < msgs_base_)) st.place.discard = true;
      if (st.place.discard) {
        dest = scratch_.data();
        want = std::min(want, scratch_.size());
      } else {
        dest = msgs_[st.place.msg - msgs_base_].data + st.place.offset + st.poff;
      }
      n = want == 0 ? 0 : ::recv(st.fd.get(), dest, want, MSG_DONTWAIT);
      if (want == 0) n = 1;  // a zero-length payload is complete at once
      if (n > 0 && want > 0) st.poff += static_cast<size_t>(n);
    }
    if (n > 0) {
      if (st.in_payload && st.poff == st.h.len) {
        st.in_payload = false;
        if (receiver_.OnPayload(st.h)) {
          bytes_[s] += st.h.len;
          ++chunks_[s];
        }
        ack_dirty_ = true;
        ack_hint_ = s;
      }
      continue;
    }
    if (n == 0) {
      Fail(s, "closed by the peer");
    } else if (errno == EINTR) {
      continue;
    } else if (!WouldBlock(errno)) {
      Fail(s, std::strerror(errno));
    }
    return Status::Ok();
  }
  return Status::Ok();
}

bool SocketRecvConnection::WriteAck(int s) {
  Stream& st = streams_[s];
  while (st.out_off < st.out_len) {
    ssize_t n = ::send(st.fd.get(), st.out.data() + st.out_off, st.out_len - st.out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      st.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && WouldBlock(errno)) return true;
    Fail(s, n < 0 ? std::strerror(errno) : "send returned 0");
    return false;
  }
  ack_written_cum_ = std::max(ack_written_cum_, st.out_cum);
  return true;
}

void SocketRecvConnection::FlushAcks() {
  const int n = static_cast<int>(streams_.size());
  // Finish acks already started (a frame is never cut short).
  for (int s = 0; s < n; ++s) {
    if (streams_[s].fd.valid() && streams_[s].out_off < streams_[s].out_len) WriteAck(s);
  }
  // An ack can vanish into a path that fails silently (no reset; the agent
  // parks it at the sender, but this end keeps writing into it): while
  // receives are open, and for a second after the last change, the current
  // ack goes out again every kAckRefreshNs on the next stream in turn, so one
  // reaches the sender over a stream that works.
  const int64_t now = RawNowNs();
  if (ack_dirty_) refresh_until_ns_ = now + kAckRefreshForNs;
  if (!ack_dirty_ && (open_ > 0 || now < refresh_until_ns_) && now - last_ack_ns_ >= kAckRefreshNs) {
    ack_dirty_ = true;
    ack_hint_ = (ack_hint_ + 1) % n;
  }
  if (!ack_dirty_) return;
  last_ack_ns_ = now;
  AckFrame ack = receiver_.Ack();
  // Each ack carries one stream's smoothed delay, round robin over the
  // streams that have one, so every stream's reaches the sender.
  for (int k = 0; k < n; ++k) {
    const int d = (owd_rr_ + k) % n;
    if (now - delay_at_[d] > kDelayFreshNs) continue;  // a stream that carries nothing now has no news
    if (std::optional<int64_t> owd = delays_[d].Smoothed()) {
      ack.has_owd = true;
      ack.owd_stream = static_cast<uint16_t>(d);
      ack.owd_ns = *owd;
      owd_rr_ = (d + 1) % n;
      break;
    }
  }
  bool sent = false;
  for (int k = 0; k < n; ++k) {
    const int s = (ack_hint_ + k) % n;
    Stream& st = streams_[s];
    if (!st.fd.valid() || st.out_off < st.out_len) continue;
    st.out = EncodeAck(ack);
    st.out_off = 0;
    st.out_len = kAckBytes;
    st.out_cum = ack.cum_seq;
    if (WriteAck(s) && st.fd.valid()) sent = true;
    if (sent && !ack_broadcast_) break;
  }
  if (sent) {
    ack_dirty_ = false;
    ack_broadcast_ = false;
  }
}

void SocketRecvConnection::Fail(int s, const std::string& why) {
  Stream& st = streams_[s];
  st.fd.Reset();
  st.in_payload = false;
  st.hdr_off = 0;
  st.out_off = st.out_len = 0;
  ack_dirty_ = true;
  ack_broadcast_ = true;  // the sender may have lost acks with this stream
  ++failovers_;
  last_error_ = "stream " + std::to_string(s) + ": " + why;
  const int up =
      static_cast<int>(std::count_if(streams_.begin(), streams_.end(), [](const Stream& x) { return x.fd.valid(); }));
  if (warn_)
    warn_("receive stream " + std::to_string(s) + " failed (" + why + "); " + StreamsLeft(up, streams_.size()));
}

}  // namespace lockstep::nccl
