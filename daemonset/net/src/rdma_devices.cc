#include "lockstep/agent/net/rdma_devices.h"

#include <infiniband/verbs.h>

namespace lockstep::agent {

std::vector<std::string> RdmaDeviceNames() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::vector<std::string> out;
  if (list == nullptr) return out;
  for (int i = 0; i < n; ++i) out.push_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return out;
}

}  // namespace lockstep::agent
