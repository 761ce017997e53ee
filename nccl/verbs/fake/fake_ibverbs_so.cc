// libibverbs-lockstep-fake.so: the in-memory RC fabric (fake_verbs.h) behind
// rdma-core's exported ibv_* symbols, so a process can point the plugin's
// loader at it (LOCKSTEP_NCCL_VERBS_LIBRARY=.../libibverbs-lockstep-fake.so)
// and run the whole plugin, LoadVerbs and verbs.h's inline paths included,
// without an RDMA device. Test-only: not installed. The devices come from
// LOCKSTEP_FAKE_VERBS_DEVICES (comma-separated names; default fake0,fake1).
// lockstep_fake_verbs_fail_path and lockstep_fake_verbs_qps let a test break
// a path from outside, as a cut cable would.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_verbs.h"

namespace {

using lockstep::nccl::VerbsApi;

const VerbsApi& Api() {
  static const VerbsApi api = [] {
    std::vector<lockstep::nccl::fake::FakeDevice> devices;
    const char* v = std::getenv("LOCKSTEP_FAKE_VERBS_DEVICES");
    const std::string names = v != nullptr ? v : "fake0,fake1";
    size_t at = 0;
    while (at < names.size()) {
      const size_t comma = std::min(names.find(',', at), names.size());
      if (comma > at) devices.push_back({.name = names.substr(at, comma - at), .ports = 1});
      at = comma + 1;
    }
    lockstep::nccl::fake::ResetFabric(devices);
    return lockstep::nccl::fake::FakeVerbsApi();
  }();
  return api;
}

}  // namespace

// The names are parenthesised: verbs.h defines some as function-like macros.
extern "C" {
__attribute__((visibility("default"))) ibv_device**(ibv_get_device_list)(int* n) { return Api().get_device_list(n); }
__attribute__((visibility("default"))) void ibv_free_device_list(ibv_device** l) { Api().free_device_list(l); }
__attribute__((visibility("default"))) const char* ibv_get_device_name(ibv_device* d) {
  return Api().get_device_name(d);
}
__attribute__((visibility("default"))) ibv_context* ibv_open_device(ibv_device* d) { return Api().open_device(d); }
__attribute__((visibility("default"))) int ibv_close_device(ibv_context* c) { return Api().close_device(c); }
__attribute__((visibility("default"))) int(ibv_query_port)(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  return Api().query_port(c, port, reinterpret_cast<ibv_port_attr*>(a));
}
__attribute__((visibility("default"))) int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  return Api().query_gid(c, port, index, gid);
}
__attribute__((visibility("default"))) ibv_pd* ibv_alloc_pd(ibv_context* c) { return Api().alloc_pd(c); }
__attribute__((visibility("default"))) int ibv_dealloc_pd(ibv_pd* pd) { return Api().dealloc_pd(pd); }
__attribute__((visibility("default"))) ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t len, int access) {
  return Api().reg_mr(pd, addr, len, access);
}
__attribute__((visibility("default"))) int ibv_dereg_mr(ibv_mr* mr) { return Api().dereg_mr(mr); }
__attribute__((visibility("default"))) ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* user, ibv_comp_channel* ch,
                                                             int vec) {
  return Api().create_cq(c, cqe, user, ch, vec);
}
__attribute__((visibility("default"))) int ibv_destroy_cq(ibv_cq* cq) { return Api().destroy_cq(cq); }
__attribute__((visibility("default"))) ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  return Api().create_qp(pd, a);
}
__attribute__((visibility("default"))) int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  return Api().modify_qp(qp, a, mask);
}
__attribute__((visibility("default"))) int ibv_destroy_qp(ibv_qp* qp) { return Api().destroy_qp(qp); }

__attribute__((visibility("default"))) int lockstep_fake_verbs_fail_path(uint32_t qpn, int delivered_unacked) {
  Api();
  return lockstep::nccl::fake::FailPath(qpn, delivered_unacked) ? 0 : -1;
}
// Live QP numbers, ascending, into `out` (at most `max`); returns how many live.
__attribute__((visibility("default"))) int lockstep_fake_verbs_qps(uint32_t* out, int max) {
  Api();
  const auto qps = lockstep::nccl::fake::Stats().qps;
  for (int i = 0; i < max && i < static_cast<int>(qps.size()); ++i) out[i] = qps[i];
  return static_cast<int>(qps.size());
}
}
