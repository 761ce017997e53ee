#include "lockstep/agent/net/netlink_route_actuator.h"

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lockstep::agent {
namespace {

struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
struct RouteFree {
  void operator()(rtnl_route* r) const { rtnl_route_put(r); }
};
struct LinkFree {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
struct AddrFree {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheFree>;
using RoutePtr = std::unique_ptr<rtnl_route, RouteFree>;
using AddrPtr = std::unique_ptr<nl_addr, AddrFree>;
using SockPtr = std::unique_ptr<nl_sock, SockFree>;

AddrPtr Ipv4Addr(uint32_t host_order, int prefix_length) {
  uint32_t be = htonl(host_order);
  AddrPtr a(nl_addr_build(AF_INET, &be, sizeof be));
  if (a) nl_addr_set_prefixlen(a.get(), prefix_length);
  return a;
}

uint32_t HostOrder(nl_addr* a) {
  if (a == nullptr || nl_addr_get_family(a) != AF_INET || nl_addr_get_len(a) != 4) return 0;
  uint32_t be = 0;
  std::memcpy(&be, nl_addr_get_binary_addr(a), 4);
  return ntohl(be);
}

// The socket's error callback: keeps the kernel's errno and extended-ack
// message (NLMSGERR_ATTR_MSG) of a failed request, then lets libnl fail it.
int OnKernelError(sockaddr_nl*, nlmsgerr* e, void* arg) {
  auto* out = static_cast<NetlinkRouteActuator::KernelError*>(arg);
  out->error = -e->error;
  out->message.clear();
  const auto* hdr = reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const char*>(e) - NLMSG_HDRLEN);
  if (hdr->nlmsg_flags & NLM_F_ACK_TLVS) {
    size_t offset = NLMSG_HDRLEN + sizeof(nlmsgerr);
    if (!(hdr->nlmsg_flags & NLM_F_CAPPED)) offset += e->msg.nlmsg_len - NLMSG_HDRLEN;
    const char* base = reinterpret_cast<const char*>(hdr);
    while (offset + NLA_HDRLEN <= hdr->nlmsg_len) {
      const auto* attr = reinterpret_cast<const nlattr*>(base + offset);
      if (attr->nla_len < NLA_HDRLEN || offset + attr->nla_len > hdr->nlmsg_len) break;
      if ((attr->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
        out->message.assign(base + offset + NLA_HDRLEN, strnlen(base + offset + NLA_HDRLEN, attr->nla_len - NLA_HDRLEN));
      }
      offset += NLA_ALIGN(attr->nla_len);
    }
  }
  return NL_STOP;
}

}  // namespace

Result<std::unique_ptr<NetlinkRouteActuator>> NetlinkRouteActuator::Open(Options options) {
  SockPtr sock(nl_socket_alloc());
  if (sock == nullptr) return Internal("netlink: out of memory allocating a socket");
  if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
    return Unavailable(std::string("cannot open a NETLINK_ROUTE socket: ") + nl_geterror(err));
  }
  int one = 1;  // best effort: kernel error texts and short error replies
  ::setsockopt(nl_socket_get_fd(sock.get()), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  ::setsockopt(nl_socket_get_fd(sock.get()), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  nl_sock* raw = sock.get();
  auto actuator = std::unique_ptr<NetlinkRouteActuator>(new NetlinkRouteActuator(sock.release(), options));
  nl_socket_modify_err_cb(raw, NL_CB_CUSTOM, OnKernelError, &actuator->last_);
  return actuator;
}

NetlinkRouteActuator::NetlinkRouteActuator(nl_sock* sock, Options options) : sock_(sock), options_(options) {}

NetlinkRouteActuator::~NetlinkRouteActuator() { nl_socket_free(sock_); }

Error NetlinkRouteActuator::ToError(int nl_error, const std::string& what) const {
  int e = last_.error;
  std::string detail = !last_.message.empty() ? last_.message
                       : e != 0              ? std::string(std::strerror(e))
                                             : std::string(nl_geterror(nl_error));
  std::string m = what + ": " + detail;
  switch (e) {
    case EPERM:
    case EACCES:
      return Error{ErrorCode::kUnauthorized,
                   m + " (changing routes needs CAP_NET_ADMIN: run as root or add NET_ADMIN to the agent's capabilities)"};
    case EEXIST:
      return Error{ErrorCode::kAlreadyExists, m};
    case ESRCH:
    case ENOENT:
      return NotFound(m);
    case ENODEV:
      return NotFound(m + " (no such interface in this network namespace)");
    case EINVAL:
    case ENETUNREACH:
    case EHOSTUNREACH:
      return InvalidArgument(m + " (is the gateway on the interface's subnet and the source a local address?)");
    default:
      return Unavailable(m);
  }
}

Status NetlinkRouteActuator::Add(const OwnedRoute& route, int flags, const char* verb) {
  const std::string what = std::string(verb) + " " + route.ToString() + " (table " + std::to_string(options_.table) + ")";
  last_ = {};
  rtnl_link* link = nullptr;
  if (int err = rtnl_link_get_kernel(sock_, 0, route.nexthop.interface.c_str(), &link); err < 0) {
    if (last_.error == ENODEV || err == -NLE_NODEV || err == -NLE_OBJ_NOTFOUND) {
      return NotFound(what + ": no such interface \"" + route.nexthop.interface + "\" in this network namespace");
    }
    return ToError(err, what);
  }
  int ifindex = rtnl_link_get_ifindex(link);
  rtnl_link_put(link);

  RoutePtr r(rtnl_route_alloc());
  rtnl_route_set_family(r.get(), AF_INET);
  rtnl_route_set_table(r.get(), options_.table);
  rtnl_route_set_protocol(r.get(), kProtoLockstep);
  rtnl_route_set_type(r.get(), RTN_UNICAST);
  rtnl_route_set_scope(r.get(), route.nexthop.gateway != 0 ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK);
  rtnl_route_set_dst(r.get(), Ipv4Addr(route.destination.address, route.destination.length).get());
  if (route.source != 0) rtnl_route_set_pref_src(r.get(), Ipv4Addr(route.source, 32).get());
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  rtnl_route_nh_set_ifindex(nh, ifindex);
  if (route.nexthop.gateway != 0) rtnl_route_nh_set_gateway(nh, Ipv4Addr(route.nexthop.gateway, 32).get());
  if (route.nexthop.onlink) rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
  rtnl_route_add_nexthop(r.get(), nh);  // the route owns nh now
  if (route.rto_min.count() > 0) {
    // The kernel uses RTAX_RTO_MIN only when it is locked (tcp_rto_min()).
    rtnl_route_set_metric(r.get(), RTAX_RTO_MIN, static_cast<unsigned>(route.rto_min.count()));
    rtnl_route_set_metric(r.get(), RTAX_LOCK, 1u << RTAX_RTO_MIN);
  }
  if (int err = rtnl_route_add(sock_, r.get(), flags); err < 0) return ToError(err, what);
  return Status::Ok();
}

Status NetlinkRouteActuator::Install(const OwnedRoute& route) {
  Status s = Add(route, NLM_F_EXCL, "installing");
  if (!s.ok() && s.code() == ErrorCode::kAlreadyExists) {
    return Error{ErrorCode::kAlreadyExists, s.error().message + " (a route to " + route.destination.ToString() +
                                                " is already in the table; Replace moves an owned one)"};
  }
  return s;
}

Status NetlinkRouteActuator::Replace(const OwnedRoute& route) {
  // NLM_F_REPLACE swaps whatever route has this key, whoever owns it: look
  // first, so a route of another protocol is never replaced.
  last_ = {};
  nl_cache* raw = nullptr;
  if (int err = rtnl_route_alloc_cache(sock_, AF_INET, 0, &raw); err < 0) {
    return ToError(err, "listing routes before replacing " + route.destination.ToString());
  }
  CachePtr cache(raw);
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    nl_addr* dst = rtnl_route_get_dst(r);
    if (rtnl_route_get_table(r) != options_.table || rtnl_route_get_priority(r) != 0 ||
        rtnl_route_get_tos(r) != 0 || rtnl_route_get_protocol(r) == kProtoLockstep ||
        static_cast<int>(nl_addr_get_prefixlen(dst)) != route.destination.length ||
        HostOrder(dst) != route.destination.address) {
      continue;
    }
    return Conflict("replacing " + route.ToString() + ": the route to " + route.destination.ToString() +
                    " in table " + std::to_string(options_.table) + " belongs to protocol " +
                    std::to_string(rtnl_route_get_protocol(r)) + ", not to lockstep (" +
                    std::to_string(kProtoLockstep) + "); it is left alone");
  }
  return Add(route, NLM_F_REPLACE, "replacing");
}

Status NetlinkRouteActuator::Delete(const Ipv4Prefix& destination) {
  const std::string what = "deleting the owned route to " + destination.ToString() + " (table " +
                           std::to_string(options_.table) + ")";
  last_ = {};
  RoutePtr r(rtnl_route_alloc());
  rtnl_route_set_family(r.get(), AF_INET);
  rtnl_route_set_table(r.get(), options_.table);
  rtnl_route_set_protocol(r.get(), kProtoLockstep);  // the kernel matches only ours
  rtnl_route_set_scope(r.get(), RT_SCOPE_NOWHERE);   // any scope
  rtnl_route_set_dst(r.get(), Ipv4Addr(destination.address, destination.length).get());
  if (int err = rtnl_route_delete(sock_, r.get(), 0); err < 0) return ToError(err, what);
  return Status::Ok();
}

Result<std::vector<OwnedRoute>> NetlinkRouteActuator::List() {
  last_ = {};
  nl_cache* links_raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_, AF_UNSPEC, &links_raw); err < 0) {
    return ToError(err, "listing interfaces");
  }
  CachePtr links(links_raw);
  nl_cache* routes_raw = nullptr;
  if (int err = rtnl_route_alloc_cache(sock_, AF_INET, 0, &routes_raw); err < 0) {
    return ToError(err, "listing routes");
  }
  CachePtr routes(routes_raw);
  std::vector<OwnedRoute> out;
  for (nl_object* o = nl_cache_get_first(routes_raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    if (rtnl_route_get_table(r) != options_.table || rtnl_route_get_protocol(r) != kProtoLockstep) continue;
    OwnedRoute route;
    nl_addr* dst = rtnl_route_get_dst(r);
    route.destination = {HostOrder(dst), static_cast<uint8_t>(nl_addr_get_prefixlen(dst))};
    route.source = HostOrder(rtnl_route_get_pref_src(r));
    if (rtnl_route_get_nnexthops(r) > 0) {
      rtnl_nexthop* nh = rtnl_route_nexthop_n(r, 0);
      route.nexthop.gateway = HostOrder(rtnl_route_nh_get_gateway(nh));
      route.nexthop.onlink = (rtnl_route_nh_get_flags(nh) & RTNH_F_ONLINK) != 0;
      char name[IF_NAMESIZE + 1] = {};
      rtnl_link_i2name(links_raw, rtnl_route_nh_get_ifindex(nh), name, sizeof name);
      route.nexthop.interface = name;
    }
    uint32_t rto = 0, lock = 0;
    bool locked = rtnl_route_get_metric(r, RTAX_LOCK, &lock) == 0 && (lock & (1u << RTAX_RTO_MIN)) != 0;
    route.rto_min = std::chrono::milliseconds(locked && rtnl_route_get_metric(r, RTAX_RTO_MIN, &rto) == 0 ? rto : 0);
    out.push_back(std::move(route));
  }
  std::sort(out.begin(), out.end(),
            [](const OwnedRoute& a, const OwnedRoute& b) { return a.destination < b.destination; });
  return out;
}

Result<std::vector<InterfaceState>> NetlinkRouteActuator::Interfaces() {
  last_ = {};
  nl_cache* raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_, AF_UNSPEC, &raw); err < 0) return ToError(err, "listing interfaces");
  CachePtr links(raw);
  std::vector<InterfaceState> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    unsigned flags = rtnl_link_get_flags(l);
    const char* name = rtnl_link_get_name(l);
    out.push_back({name != nullptr ? name : "", rtnl_link_get_ifindex(l), (flags & IFF_UP) && (flags & IFF_RUNNING)});
  }
  std::sort(out.begin(), out.end(), [](const InterfaceState& a, const InterfaceState& b) { return a.name < b.name; });
  return out;
}

Result<int> NetlinkRouteActuator::ReleaseUnresolvedNeighbours(const std::string& interface) {
  last_ = {};
  const unsigned ifindex = if_nametoindex(interface.c_str());
  if (ifindex == 0) return NotFound("releasing neighbours: no interface " + interface);
  nl_cache* raw = nullptr;
  if (int err = rtnl_neigh_alloc_cache(sock_, &raw); err < 0) return ToError(err, "listing neighbours");
  CachePtr neighbours(raw);
  int deleted = 0;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* n = reinterpret_cast<rtnl_neigh*>(o);
    if (rtnl_neigh_get_family(n) != AF_INET || rtnl_neigh_get_ifindex(n) != static_cast<int>(ifindex) ||
        (rtnl_neigh_get_state(n) & NUD_INCOMPLETE) == 0) {
      continue;
    }
    // Deleting an INCOMPLETE entry fails it: the kernel drops its queue.
    if (int err = rtnl_neigh_delete(sock_, n, 0); err < 0) {
      if (-err == NLE_OBJ_NOTFOUND) continue;  // resolved or gone meanwhile
      return ToError(err, "deleting an unresolved neighbour on " + interface);
    }
    ++deleted;
  }
  return deleted;
}

}  // namespace lockstep::agent
