// The NCCL network plugin ABI adapter: ncclNetPlugin_v8, _v9 and _v10 over the
// transport port. Everything NCCL calls lands here; nothing here throws across
// the C ABI (every entry point catches), aborts or blocks. Errors become NCCL
// result codes with a warning through NCCL's logger:
//   ncclInvalidArgument  a malformed or foreign handle, bad LOCKSTEP_NCCL_* settings
//   ncclSystemError      the network failed (every stream of a connection is gone)
//   ncclInternalError    misuse (a non-host buffer, n > maxRecvs, an unknown request)
//                        or a peer that broke the protocol
// Thread safety: init/devices/getProperties/listen/connect/accept share one
// mutex (NCCL calls them from several threads); each comm and its requests are
// used by one thread at a time (NCCL's proxy thread), as the ext-net API states.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lockstep/nccl/agent_link.h"
#include "lockstep/nccl/handle.h"
#include "lockstep/nccl/socket_transport.h"
#include "lockstep/nccl/verbs_api.h"
#include "lockstep/nccl/verbs_transport.h"
#include "nccl_net_abi.h"

namespace lockstep::nccl {
namespace {

constexpr uint32_t kListenMagic = 0x4c4b4c31;
constexpr uint32_t kSendMagic = 0x4c4b5331;
constexpr uint32_t kRecvMagic = 0x4c4b5231;
constexpr uint32_t kRequestMagic = 0x4c4b5131;
// Requests per comm: NCCL keeps at most NCCL_NET_MAX_REQUESTS (32) in flight.
constexpr size_t kMaxRequests = 64;
static_assert(kMaxRequests >= NCCL_NET_MAX_REQUESTS);
static_assert(kHandleBytes == NCCL_NET_HANDLE_MAXSIZE);

struct Request {
  uint32_t magic = kRequestMagic;
  bool in_use = false;
  bool send = false;
  RequestId id = 0;
  void* comm = nullptr;
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  std::unique_ptr<Listener> listener;
};

struct SendComm {
  uint32_t magic = kSendMagic;
  std::unique_ptr<SendConnection> conn;
  Request requests[kMaxRequests]{};
};

struct RecvComm {
  uint32_t magic = kRecvMagic;
  std::unique_ptr<RecvConnection> conn;
  Request requests[kMaxRequests]{};
};

// The memory registration handle: host memory needs none, but NCCL wants a
// non-null pointer.
struct MemoryHandle {
  int type = NCCL_PTR_HOST;
};
MemoryHandle g_host_mr;

std::mutex g_mu;
ncclDebugLogger_t g_log = nullptr;
std::unique_ptr<Transport> g_transport;                            // GUARDED_BY(g_mu) for creation
DeviceProperties g_props;                                          // GUARDED_BY(g_mu)
std::map<uint64_t, std::unique_ptr<PendingConnection>> g_pending;  // GUARDED_BY(g_mu)
uint64_t g_next_stage = 1;                                         // GUARDED_BY(g_mu)

void Log(ncclDebugLogLevel level, const std::string& m) {
  ncclDebugLogger_t log = g_log;
  if (log != nullptr) {
    log(level, NCCL_NET, __FILE__, __LINE__, "NET/Lockstep: %s", m.c_str());
  } else if (level == NCCL_LOG_WARN) {
    std::fprintf(stderr, "NET/Lockstep: %s\n", m.c_str());
  }
}
void Warn(const std::string& m) { Log(NCCL_LOG_WARN, m); }

ncclResult_t Fail(const Error& e, const char* what) {
  Warn(std::string(what) + ": " + e.message);
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      return ncclInvalidArgument;
    case ErrorCode::kUnavailable:
      return ncclSystemError;
    default:
      return ncclInternalError;
  }
}

// Runs `f`, turning any exception into ncclInternalError (nothing may unwind
// into NCCL's C code).
template <typename F>
ncclResult_t Guard(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) { Warn(std::string(what) + ": " + e.what()); } catch (...) {
    Warn(std::string(what) + ": unknown exception");
  }
  return ncclInternalError;
}

Request* FreeSlot(Request* slots, void* comm, bool send) {
  for (size_t i = 0; i < kMaxRequests; ++i) {
    if (!slots[i].in_use) {
      slots[i].send = send;
      slots[i].comm = comm;
      return &slots[i];
    }
  }
  return nullptr;
}

// ---- the version-independent implementation ----

// The verbs transport: rdma-core loaded at run time (LOCKSTEP_NCCL_VERBS_LIBRARY,
// default libibverbs.so.1), its QP exchange on the first configured rail's
// address, chunk and window from the same settings as the sockets transport.
// With the node agent: the listener's host address goes in the handle and a
// primary QP is parked while the agent's verdict on (its rail's address, from
// its RoCE GID; the peer's host) says failed; each connection end reports its
// QPs (bytes, chunks, failovers, state, and at receivers one-way delays from
// chunks stamped in fabric time) every second.
Result<std::unique_ptr<Transport>> MakeVerbs(const SocketTransportConfig& sockets,
                                             const std::shared_ptr<AgentLink>& agent) {
  const char* lib = std::getenv("LOCKSTEP_NCCL_VERBS_LIBRARY");
  Result<VerbsApi> api = LoadVerbs(lib != nullptr && *lib != '\0' ? lib : "libibverbs.so.1");
  if (!api.ok()) return api.error();
  Result<VerbsTransportConfig> config = VerbsConfigFromEnv([](const char* n) { return std::getenv(n); });
  if (!config.ok()) return config.error();
  config->bootstrap_ipv4 = sockets.rails.at(0).ipv4;
  if (std::getenv("LOCKSTEP_NCCL_CHUNK_BYTES") != nullptr) config->stripe.chunk_bytes = sockets.stripe.chunk_bytes;
  if (std::getenv("LOCKSTEP_NCCL_WINDOW") != nullptr) {
    config->stripe.window_per_stream = sockets.stripe.window_per_stream;
  }
  if (agent) {
    config->host = [agent] {
      agent->Poll();
      std::shared_ptr<const AgentState> st = agent->State();
      return st ? st->host : Ipv4{};
    };
    config->report = [agent](uint64_t conn, bool send, std::vector<StreamReport> qps) {
      agent->Report(conn, send, std::move(qps));
    };
    config->closed = [agent](uint64_t conn, bool send) { agent->Close(conn, send); };
    config->fabric_now_ns = [agent] { return agent->FabricNowNs(); };
    config->path_failed = [agent](const VerbsPath& p) {
      if (p.rail_ipv4 == Ipv4{} || p.peer_host == Ipv4{}) return false;  // InfiniBand, or a peer without agent
      agent->Poll();
      std::shared_ptr<const AgentState> st = agent->State();
      return st != nullptr && !st->Usable(p.rail_ipv4, p.peer_host).value_or(true);
    };
  }
  config->info = [](const std::string& m) { Log(NCCL_LOG_INFO, m); };
  return MakeVerbsTransport(*api, *config, Warn);
}

ncclResult_t Init(ncclDebugLogger_t log) {
  return Guard("init", [&] {
    std::lock_guard<std::mutex> lock(g_mu);
    g_log = log;
    if (g_transport) return ncclSuccess;
    auto getenv = [](const char* n) -> const char* { return std::getenv(n); };
    // The node agent (path health, fabric time, reports): one line either way;
    // without it the plugin runs on socket errors alone.
    std::shared_ptr<AgentLink> agent;
    Result<std::optional<AgentLinkOptions>> ao = AgentLinkOptionsFromEnv(getenv);
    if (!ao.ok()) return Fail(ao.error(), "init (settings)");
    if (ao->has_value()) {
      agent = std::make_shared<AgentLink>(
          **ao, [](const std::string& m) { Log(NCCL_LOG_INFO, m); }, Warn);
      agent->Start();
    } else {
      Log(NCCL_LOG_INFO, "node agent turned off (LOCKSTEP_NCCL_AGENT_SOCKET=off): no path health, no fabric time");
    }
    // Without LOCKSTEP_NCCL_RAILS, the agent's rails (when it has any).
    std::string agent_rails;
    if (agent && agent->connected()) {
      for (const Ipv4& r : agent->State()->rails) agent_rails += (agent_rails.empty() ? "" : ",") + Ipv4String(r);
    }
    Result<SocketTransportConfig> config = SocketConfigFromEnv([&](const char* n) -> const char* {
      const char* v = std::getenv(n);
      if (std::strcmp(n, "LOCKSTEP_NCCL_RAILS") == 0 && (v == nullptr || *v == '\0') && !agent_rails.empty()) {
        return agent_rails.c_str();
      }
      return v;
    });
    if (!config.ok()) return Fail(config.error(), "init (settings)");
    // The transport: sockets (default), verbs (RDMA; no device is an error
    // that says so) or auto (verbs where a device exists, else sockets).
    const char* tv = std::getenv("LOCKSTEP_NCCL_TRANSPORT");
    const std::string which = tv != nullptr && *tv != '\0' ? tv : "sockets";
    if (which != "sockets" && which != "verbs" && which != "auto") {
      return Fail(InvalidArgument("LOCKSTEP_NCCL_TRANSPORT=" + which + ": expected sockets, verbs or auto"),
                  "init (settings)");
    }
    if (which != "sockets") {
      Result<std::unique_ptr<Transport>> verbs = MakeVerbs(*config, agent);
      if (verbs.ok()) {
        g_transport = std::move(*verbs);
        g_props = g_transport->Properties(0);
        Log(NCCL_LOG_INFO, "verbs transport, device " + g_props.name + ", " + std::to_string(g_props.streams) +
                               " QPs per connection (a standby among them when there are more than rails)");
        return ncclSuccess;
      }
      if (which == "verbs") return Fail(verbs.error(), "init (LOCKSTEP_NCCL_TRANSPORT=verbs)");
      Log(NCCL_LOG_INFO, verbs.error().message + "; LOCKSTEP_NCCL_TRANSPORT=auto: using the sockets transport");
    }
    g_transport = MakeSocketTransport(*config, Warn, agent);
    g_props = g_transport->Properties(0);
    Log(NCCL_LOG_INFO, "sockets transport, device " + g_props.name + ", " + std::to_string(g_props.streams) +
                           " streams per connection, chunks of " + std::to_string(config->stripe.chunk_bytes) +
                           " bytes, " + std::to_string(config->stripe.window_per_stream) + " in flight per stream");
    return ncclSuccess;
  });
}

Transport* GetTransport() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_transport.get();
}

ncclResult_t Devices(int* ndev) {
  if (ndev == nullptr) return ncclInvalidArgument;
  Transport* t = GetTransport();
  *ndev = t ? t->Devices() : 0;
  return ncclSuccess;
}

ncclResult_t CheckDevice(int dev) {
  Transport* t = GetTransport();
  if (t == nullptr) {
    Warn("called before init");
    return ncclInternalError;
  }
  if (dev < 0 || dev >= t->Devices()) {
    Warn("device " + std::to_string(dev) + " does not exist");
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t GetPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  if (ncclResult_t r = CheckDevice(dev); r != ncclSuccess) return r;
  if (props == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(g_mu);
  std::memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(g_props.name.c_str());
  props->pciPath = nullptr;  // no single PCI device: NCCL places it at the CPU
  props->guid = g_props.guid + static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = g_props.speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;  // grouped receives (n > 1) are not supported yet
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = static_cast<size_t>(kMaxMessageBytes);
  props->maxCollBytes = static_cast<size_t>(kMaxMessageBytes);
  return ncclSuccess;
}

ncclResult_t GetPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
  ncclNetProperties_v10_t p;
  if (ncclResult_t r = GetPropertiesV10(dev, &p); r != ncclSuccess) return r;
  if (props == nullptr) return ncclInvalidArgument;
  *props = ncclNetProperties_v8_t{.name = p.name,
                                  .pciPath = p.pciPath,
                                  .guid = p.guid,
                                  .ptrSupport = p.ptrSupport,
                                  .regIsGlobal = p.regIsGlobal,
                                  .speed = p.speed,
                                  .port = p.port,
                                  .latency = p.latency,
                                  .maxComms = p.maxComms,
                                  .maxRecvs = p.maxRecvs,
                                  .netDeviceType = p.netDeviceType,
                                  .netDeviceVersion = p.netDeviceVersion};
  return ncclSuccess;
}

ncclResult_t Listen(int dev, void* handle, void** listen_comm) {
  return Guard("listen", [&] {
    if (ncclResult_t r = CheckDevice(dev); r != ncclSuccess) return r;
    if (handle == nullptr || listen_comm == nullptr) return ncclInvalidArgument;
    *listen_comm = nullptr;
    Result<std::unique_ptr<Listener>> l = GetTransport()->Listen(dev, static_cast<uint8_t*>(handle));
    if (!l.ok()) return Fail(l.error(), "listen");
    *listen_comm = new ListenComm{.listener = std::move(*l)};
    return ncclSuccess;
  });
}

ncclResult_t Connect(int dev, void* handle, void** send_comm) {
  return Guard("connect", [&] {
    if (ncclResult_t r = CheckDevice(dev); r != ncclSuccess) return r;
    if (handle == nullptr || send_comm == nullptr) return ncclInvalidArgument;
    *send_comm = nullptr;
    auto* h = static_cast<uint8_t*>(handle);
    if (Result<ListenHandle> decoded = DecodeHandle(h); !decoded.ok()) return Fail(decoded.error(), "connect");
    std::lock_guard<std::mutex> lock(g_mu);
    uint64_t stage = ConnectStage(h);
    if (stage == 0) {
      Result<std::unique_ptr<PendingConnection>> p = g_transport->Connect(dev, h);
      if (!p.ok()) return Fail(p.error(), "connect");
      stage = g_next_stage++;
      g_pending.emplace(stage, std::move(*p));
      SetConnectStage(h, stage);
    }
    auto it = g_pending.find(stage);
    if (it == g_pending.end()) {
      return Fail(InvalidArgument("the handle names connection attempt " + std::to_string(stage) +
                                  ", which this process never started (a handle copied from another connect?)"),
                  "connect");
    }
    Result<std::unique_ptr<SendConnection>> c = it->second->Poll();
    if (!c.ok()) {
      g_pending.erase(it);
      SetConnectStage(h, 0);
      return Fail(c.error(), "connect");
    }
    if (!*c) return ncclSuccess;  // not yet: NCCL calls again
    g_pending.erase(it);
    SetConnectStage(h, 0);
    *send_comm = new SendComm{.conn = std::move(*c)};
    return ncclSuccess;
  });
}

ncclResult_t Accept(void* listen_comm, void** recv_comm) {
  return Guard("accept", [&] {
    auto* l = static_cast<ListenComm*>(listen_comm);
    if (l == nullptr || l->magic != kListenMagic || recv_comm == nullptr) {
      Warn("accept: not a listen comm of this plugin");
      return ncclInvalidArgument;
    }
    *recv_comm = nullptr;
    Result<std::unique_ptr<RecvConnection>> c = l->listener->Accept();
    if (!c.ok()) return Fail(c.error(), "accept");
    if (*c) *recv_comm = new RecvComm{.conn = std::move(*c)};
    return ncclSuccess;
  });
}

ncclResult_t RegMr(void* comm, void* /*data*/, size_t /*size*/, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  if (type != NCCL_PTR_HOST) {
    Warn("regMr: only host memory (NCCL_PTR_HOST) is supported; got type " + std::to_string(type));
    return ncclInternalError;
  }
  *mhandle = &g_host_mr;
  return ncclSuccess;
}

ncclResult_t RegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  Warn("regMrDmaBuf: DMA-BUF is not supported (host memory only)");
  return ncclInternalError;
}

ncclResult_t DeregMr(void*, void*) { return ncclSuccess; }

ncclResult_t Isend(void* send_comm, void* data, size_t size, int tag, void** request) {
  return Guard("isend", [&] {
    auto* c = static_cast<SendComm*>(send_comm);
    if (c == nullptr || c->magic != kSendMagic || request == nullptr) {
      Warn("isend: not a send comm of this plugin");
      return ncclInternalError;
    }
    *request = nullptr;
    Request* slot = FreeSlot(c->requests, c, true);
    if (slot == nullptr) return ncclSuccess;  // would block
    Result<std::optional<RequestId>> id = c->conn->Send(data, size, tag);
    if (!id.ok()) return Fail(id.error(), "isend");
    if (!*id) return ncclSuccess;
    slot->id = **id;
    slot->in_use = true;
    *request = slot;
    return ncclSuccess;
  });
}

ncclResult_t Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** request) {
  return Guard("irecv", [&] {
    auto* c = static_cast<RecvComm*>(recv_comm);
    if (c == nullptr || c->magic != kRecvMagic || request == nullptr) {
      Warn("irecv: not a receive comm of this plugin");
      return ncclInternalError;
    }
    *request = nullptr;
    if (n != 1) {
      Warn("irecv: " + std::to_string(n) + " grouped receives, but this plugin reports maxRecvs = 1");
      return ncclInternalError;
    }
    if (data == nullptr || sizes == nullptr) {
      Warn("irecv: no buffer or no (non-negative) size");
      return ncclInvalidArgument;
    }
    Request* slot = FreeSlot(c->requests, c, false);
    if (slot == nullptr) return ncclSuccess;
    Result<std::optional<RequestId>> id = c->conn->Recv(data[0], sizes[0], tags ? tags[0] : 0);
    if (!id.ok()) return Fail(id.error(), "irecv");
    if (!*id) return ncclSuccess;
    slot->id = **id;
    slot->in_use = true;
    *request = slot;
    return ncclSuccess;
  });
}

ncclResult_t Iflush(void*, int, void**, int*, void**, void** request) {
  // Host memory: nothing to flush. A null request tells NCCL it is done.
  if (request != nullptr) *request = nullptr;
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* sizes) {
  return Guard("test", [&] {
    auto* r = static_cast<Request*>(request);
    if (r == nullptr || r->magic != kRequestMagic || !r->in_use || done == nullptr) {
      Warn("test: not an outstanding request of this plugin");
      return ncclInternalError;
    }
    *done = 0;
    Result<TestResult> t = r->send ? static_cast<SendComm*>(r->comm)->conn->Test(r->id)
                                   : static_cast<RecvComm*>(r->comm)->conn->Test(r->id);
    if (!t.ok()) return Fail(t.error(), r->send ? "test (send)" : "test (receive)");
    if (!t->done) return ncclSuccess;
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(t->size);
    r->in_use = false;
    return ncclSuccess;
  });
}

ncclResult_t CloseSend(void* comm) {
  auto* c = static_cast<SendComm*>(comm);
  if (c != nullptr && c->magic == kSendMagic) {
    c->magic = 0;
    delete c;
  }
  return ncclSuccess;
}

ncclResult_t CloseRecv(void* comm) {
  auto* c = static_cast<RecvComm*>(comm);
  if (c != nullptr && c->magic == kRecvMagic) {
    c->magic = 0;
    delete c;
  }
  return ncclSuccess;
}

ncclResult_t CloseListen(void* comm) {
  auto* c = static_cast<ListenComm*>(comm);
  if (c != nullptr && c->magic == kListenMagic) {
    c->magic = 0;
    delete c;
  }
  return ncclSuccess;
}

// ---- per-version entry points ----

ncclResult_t InitV10(ncclDebugLogger_t log, ncclProfilerCallback_t) { return Init(log); }
ncclResult_t ConnectV8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  return Connect(dev, handle, send_comm);
}
ncclResult_t ConnectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v10_t**) {
  return Connect(dev, handle, send_comm);
}
ncclResult_t AcceptAny(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
  return Accept(listen_comm, recv_comm);
}
ncclResult_t IsendV8(void* comm, void* data, int size, int tag, void*, void** request) {
  if (size < 0) {
    Warn("isend: negative size " + std::to_string(size));
    return ncclInvalidArgument;
  }
  return Isend(comm, data, static_cast<size_t>(size), tag, request);
}
ncclResult_t IsendV9(void* comm, void* data, size_t size, int tag, void*, void** request) {
  return Isend(comm, data, size, tag, request);
}
ncclResult_t IsendV10(void* comm, void* data, size_t size, int tag, void*, void*, void** request) {
  return Isend(comm, data, size, tag, request);
}
ncclResult_t IrecvV8(void* comm, int n, void** data, int* sizes, int* tags, void**, void** request) {
  if (n != 1 || sizes == nullptr || sizes[0] < 0) return Irecv(comm, n, data, nullptr, tags, request);
  const size_t size = static_cast<size_t>(sizes[0]);
  return Irecv(comm, n, data, &size, tags, request);
}
ncclResult_t IrecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void**, void** request) {
  return Irecv(comm, n, data, sizes, tags, request);
}
ncclResult_t IrecvV10(void* comm, int n, void** data, size_t* sizes, int* tags, void**, void**, void** request) {
  return Irecv(comm, n, data, sizes, tags, request);
}

}  // namespace
}  // namespace lockstep::nccl

namespace ln = lockstep::nccl;

#define LOCKSTEP_NCCL_EXPORT __attribute__((visibility("default")))

extern "C" {

LOCKSTEP_NCCL_EXPORT extern const ncclNet_v10_t ncclNetPlugin_v10;
LOCKSTEP_NCCL_EXPORT extern const ncclNet_v9_t ncclNetPlugin_v9;
LOCKSTEP_NCCL_EXPORT extern const ncclNet_v8_t ncclNetPlugin_v8;

const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "Lockstep",
    .init = ln::InitV10,
    .devices = ln::Devices,
    .getProperties = ln::GetPropertiesV10,
    .listen = ln::Listen,
    .connect = ln::ConnectV10,
    .accept = ln::AcceptAny,
    .regMr = ln::RegMr,
    .regMrDmaBuf = ln::RegMrDmaBuf,
    .deregMr = ln::DeregMr,
    .isend = ln::IsendV10,
    .irecv = ln::IrecvV10,
    .iflush = ln::Iflush,
    .test = ln::Test,
    .closeSend = ln::CloseSend,
    .closeRecv = ln::CloseRecv,
    .closeListen = ln::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "Lockstep",
    .init = ln::Init,
    .devices = ln::Devices,
    .getProperties = ln::GetPropertiesV10,
    .listen = ln::Listen,
    .connect = ln::ConnectV8,
    .accept = ln::AcceptAny,
    .regMr = ln::RegMr,
    .regMrDmaBuf = ln::RegMrDmaBuf,
    .deregMr = ln::DeregMr,
    .isend = ln::IsendV9,
    .irecv = ln::IrecvV9,
    .iflush = ln::Iflush,
    .test = ln::Test,
    .closeSend = ln::CloseSend,
    .closeRecv = ln::CloseRecv,
    .closeListen = ln::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "Lockstep",
    .init = ln::Init,
    .devices = ln::Devices,
    .getProperties = ln::GetPropertiesV8,
    .listen = ln::Listen,
    .connect = ln::ConnectV8,
    .accept = ln::AcceptAny,
    .regMr = ln::RegMr,
    .regMrDmaBuf = ln::RegMrDmaBuf,
    .deregMr = ln::DeregMr,
    .isend = ln::IsendV8,
    .irecv = ln::IrecvV8,
    .iflush = ln::Iflush,
    .test = ln::Test,
    .closeSend = ln::CloseSend,
    .closeRecv = ln::CloseRecv,
    .closeListen = ln::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

}  // extern "C"
