// VerbsApi: the port through which the verbs transport reaches rdma-core.
// A table of the ibv_* calls the transport uses, with rdma-core's own types
// (<infiniband/verbs.h>), filled either by LoadVerbs (dlopen of
// libibverbs.so.1 at run time: the plugin has no link-time dependency on
// rdma-core and loads on hosts without it) or by the in-repo fake
// (fake_verbs.h: an in-memory RC fabric).
//
// Several ibv_* calls are static inline in verbs.h and not exported:
// ibv_post_send, ibv_post_recv and ibv_poll_cq go through the context's ops
// (qp->context->ops.post_send, ...), and ibv_query_port goes through the
// extended context's query_port when the provider has one (else the exported
// compat symbol). LoadVerbs fills those entries with functions that do what
// the inlines do, so a table from LoadVerbs behaves like code compiled
// against verbs.h. ibv_reg_mr is resolved as the exported symbol (the inline
// only switches to ibv_reg_mr_iova2 for IBV_ACCESS_OPTIONAL_RANGE, unused here).
//
// Thread-compatible: a loaded table is immutable; the calls are rdma-core's.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_port)(ibv_context* context, uint8_t port_num, ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  // The static inlines of verbs.h (see the top).
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) = nullptr;
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) = nullptr;
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc) = nullptr;

  std::string source;  // "libibverbs.so.1", or "fake" for the in-repo fake
};

// dlopen()s `library` (default libibverbs.so.1) and resolves the table. The
// library stays loaded for the life of the process (rdma-core's providers do
// not support unloading). Unavailable: "no RDMA device: <library> cannot be
// loaded (<dlerror>)" or "... lacks <symbol>". Loading is not enough to have a
// device: OpenVerbsDevices says that.
Result<VerbsApi> LoadVerbs(const std::string& library = "libibverbs.so.1");

}  // namespace lockstep::nccl
