#include "lockstep/nccl/verbs_api.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>

namespace lockstep::nccl {
namespace {

// The exported symbols behind the inlines. One rdma-core per process: the
// first successful LoadVerbs sets them (a second load of the same library
// resolves the same addresses).
using CompatQueryPort = int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
CompatQueryPort g_compat_query_port = nullptr;

int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return qp->context->ops.post_send(qp, wr, bad); }
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return qp->context->ops.post_recv(qp, wr, bad); }
int PollCq(ibv_cq* cq, int n, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }

// What verbs.h's ___ibv_query_port does.
int QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  // verbs_get_ctx_op(context, query_port), without its statement expression.
  verbs_context* vctx = verbs_get_ctx(context);
  if (vctx != nullptr && (vctx->sz < sizeof(*vctx) - offsetof(verbs_context, query_port) || !vctx->query_port)) {
    vctx = nullptr;
  }
  if (vctx == nullptr) {
    std::memset(attr, 0, sizeof *attr);
    return g_compat_query_port(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
  }
  return vctx->query_port(context, port, attr, sizeof *attr);
}

template <typename F>
bool Resolve(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace

Result<VerbsApi> LoadVerbs(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    return Unavailable("no RDMA device: " + library + " cannot be loaded (" + (e ? e : "unknown error") +
                       "; install rdma-core's libibverbs1)");
  }
  VerbsApi api;
  std::string missing;
  Resolve(lib, "ibv_get_device_list", &api.get_device_list, &missing);
  Resolve(lib, "ibv_free_device_list", &api.free_device_list, &missing);
  Resolve(lib, "ibv_get_device_name", &api.get_device_name, &missing);
  Resolve(lib, "ibv_open_device", &api.open_device, &missing);
  Resolve(lib, "ibv_close_device", &api.close_device, &missing);
  Resolve(lib, "ibv_query_gid", &api.query_gid, &missing);
  Resolve(lib, "ibv_alloc_pd", &api.alloc_pd, &missing);
  Resolve(lib, "ibv_dealloc_pd", &api.dealloc_pd, &missing);
  Resolve(lib, "ibv_reg_mr", &api.reg_mr, &missing);
  Resolve(lib, "ibv_dereg_mr", &api.dereg_mr, &missing);
  Resolve(lib, "ibv_create_cq", &api.create_cq, &missing);
  Resolve(lib, "ibv_destroy_cq", &api.destroy_cq, &missing);
  Resolve(lib, "ibv_create_qp", &api.create_qp, &missing);
  Resolve(lib, "ibv_modify_qp", &api.modify_qp, &missing);
  Resolve(lib, "ibv_destroy_qp", &api.destroy_qp, &missing);
  CompatQueryPort compat = nullptr;
  Resolve(lib, "ibv_query_port", &compat, &missing);
  if (!missing.empty()) {
    dlclose(lib);
    return Unavailable("no RDMA device: " + library + " lacks " + missing + " (not rdma-core's libibverbs?)");
  }
  g_compat_query_port = compat;
  api.query_port = QueryPort;
  api.post_send = PostSend;
  api.post_recv = PostRecv;
  api.poll_cq = PollCq;
  api.source = library;
  return api;
}

}  // namespace lockstep::nccl
