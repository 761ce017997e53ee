#include "lockstep/agent/net/rail_discovery.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

#include <cstring>
#include <memory>
#include <optional>

namespace lockstep::agent {
namespace {

uint32_t HostOrder(nl_addr* a) {
  if (a == nullptr || nl_addr_get_family(a) != AF_INET || nl_addr_get_len(a) != 4) return 0;
  uint32_t v = 0;
  std::memcpy(&v, nl_addr_get_binary_addr(a), 4);
  return ntohl(v);
}

bool Covers(nl_addr* dst, uint32_t address) {
  if (dst == nullptr || address == 0) return false;
  unsigned len = nl_addr_get_prefixlen(dst);
  if (len == 0 || len > 32) return false;
  uint32_t mask = len == 32 ? 0xffffffffu : ~(0xffffffffu >> len);
  return (HostOrder(dst) & mask) == (address & mask);
}

}  // namespace

Result<uint32_t> InterfaceIpv4(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Unavailable("cannot list interface addresses (getifaddrs)");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, ::freeifaddrs);
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || interface != i->ifa_name) continue;
    return ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
  }
  return NotFound("interface \"" + interface +
                  "\" has no IPv4 address (or does not exist): set fabric.hostAddress, or fabric.hostInterface to "
                  "the interface that holds this host's address");
}

Result<std::vector<RailInfo>> DiscoverRails(const std::vector<std::string>& names) {
  std::vector<RailInfo> rails;
  for (const std::string& name : names) {
    RailInfo r;
    r.name = name;
    r.ifindex = static_cast<int>(::if_nametoindex(name.c_str()));
    if (r.ifindex == 0) {
      return NotFound("fabric.rails: no interface \"" + name + "\" on this host (ip -br link lists them)");
    }
    auto addr = InterfaceIpv4(name);
    if (!addr.ok()) return NotFound("fabric.rails: rail \"" + name + "\" has no IPv4 address");
    r.address = *addr;
    rails.push_back(std::move(r));
  }
  nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return Unavailable("rail discovery: cannot allocate a netlink socket");
  std::unique_ptr<nl_sock, decltype(&nl_socket_free)> sock_guard(sock, nl_socket_free);
  if (int err = nl_connect(sock, NETLINK_ROUTE); err < 0) {
    return Unavailable(std::string("rail discovery: netlink: ") + nl_geterror(err));
  }
  nl_cache* cache = nullptr;
  if (int err = rtnl_route_alloc_cache(sock, AF_INET, 0, &cache); err < 0) {
    return Unavailable(std::string("rail discovery: listing routes: ") + nl_geterror(err));
  }
  std::unique_ptr<nl_cache, decltype(&nl_cache_free)> cache_guard(cache, nl_cache_free);
  for (RailInfo& rail : rails) {
    std::optional<Nexthop> subnet, any;
    for (nl_object* o = nl_cache_get_first(cache); o != nullptr; o = nl_cache_get_next(o)) {
      auto* route = reinterpret_cast<rtnl_route*>(o);
      if (rtnl_route_get_table(route) != RT_TABLE_MAIN || rtnl_route_get_type(route) != RTN_UNICAST) continue;
      for (int i = 0; i < rtnl_route_get_nnexthops(route); ++i) {
        rtnl_nexthop* nh = rtnl_route_nexthop_n(route, i);
        uint32_t gw = HostOrder(rtnl_route_nh_get_gateway(nh));
        if (rtnl_route_nh_get_ifindex(nh) != rail.ifindex || gw == 0) continue;
        Nexthop n{gw, rail.name, (rtnl_route_nh_get_flags(nh) & RTNH_F_ONLINK) != 0};
        if (!subnet && Covers(rtnl_route_get_dst(route), rail.address)) subnet = n;
        if (!any) any = n;
      }
    }
    if (!subnet && !any) {
      return NotFound("fabric.rails: rail \"" + rail.name +
                      "\" has no route with a gateway in the main table (the agent pins traffic via the gateway of "
                      "the rail's subnet route)");
    }
    rail.gateway = subnet ? *subnet : *any;
  }
  return rails;
}

}  // namespace lockstep::agent
