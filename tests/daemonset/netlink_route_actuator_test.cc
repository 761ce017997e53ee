// NetlinkRouteActuator against the real kernel, in a network namespace each
// test creates: two veth "rails" with addresses, a host address on lo, and
// gateways on the rails' subnets. Every change is checked independently of
// the adapter, through `ip -j route` (parsed with nlohmann-json) and `ip
// route` text. Needs root (ctest label netns); skips with a message otherwise.
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "lockstep/agent/net/netlink_route_actuator.h"
#include "lockstep/agent/route_reconcile.h"
#include "test_netns.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;
using lockstep::testing::TestNetns;

#define SKIP_UNLESS_ROOT()                                                                       \
  if (!TestNetns::IsRoot()) {                                                                    \
    WARN("SKIPPED: needs root (creates a network namespace and changes its routes)");            \
    return;                                                                                      \
  }

uint32_t A(const char* text) { return ParseIpv4(text).value(); }

// A namespace with rails rail0 (10.77.0.1/24) and rail1 (10.77.1.1/24), each
// a veth whose peer (rail<r>p) stays in the namespace, and the host address
// 10.77.200.1/32 on lo.
struct Lab {
  TestNetns ns{"lsact"};
  std::unique_ptr<NetlinkRouteActuator> actuator;

  Lab() {
    for (int r = 0; r < 2; ++r) {
      std::string rail = "rail" + std::to_string(r);
      REQUIRE(ns.Ip("link add " + rail + " type veth peer name " + rail + "p").exit_code == 0);
      REQUIRE(ns.Ip("addr add 10.77." + std::to_string(r) + ".1/24 dev " + rail).exit_code == 0);
      REQUIRE(ns.Ip("link set " + rail + " up").exit_code == 0);
      REQUIRE(ns.Ip("link set " + rail + "p up").exit_code == 0);
    }
    REQUIRE(ns.Ip("addr add 10.77.200.1/32 dev lo").exit_code == 0);
    auto opened = ns.Inside([] { return NetlinkRouteActuator::Open({}); });
    REQUIRE(opened.ok());
    actuator = std::move(*opened);
  }

  // The owned routes as the kernel reports them (ip -j route show proto 211).
  nlohmann::json Owned() const {
    auto r = ns.Ip("-j route show table main proto 211");
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  }
  std::string Text(const std::string& filter = "") const { return ns.Ip("route show " + filter).out; }
};

// Peer `peer`'s host route via rail `rail`.
OwnedRoute Pin(int peer, int rail, std::chrono::milliseconds rto_min = kDefaultRtoMin) {
  OwnedRoute r;
  r.destination = Ipv4Prefix{A("10.77.200.0") + static_cast<uint32_t>(peer), 32};
  r.nexthop = {A("10.77.0.254") + (static_cast<uint32_t>(rail) << 8), "rail" + std::to_string(rail)};
  r.source = A("10.77.200.1");
  r.rto_min = rto_min;
  return r;
}

// A netlink socket subscribed to IPv4 route notifications, opened in the lab.
class RouteMonitor {
 public:
  explicit RouteMonitor(const TestNetns& ns) {
    fd_ = ns.Inside([] {
      int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
      sockaddr_nl sa{};
      sa.nl_family = AF_NETLINK;
      sa.nl_groups = RTMGRP_IPV4_ROUTE;
      if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return -1;
      return fd;
    });
    REQUIRE(fd_ >= 0);
  }
  ~RouteMonitor() { ::close(fd_); }
  // The notifications so far: "new", "new(replace)" or "del". The kernel
  // queues them before it acknowledges the change, so nothing is pending.
  std::vector<std::string> Drain() {
    std::vector<std::string> out;
    char buf[16384];
    ssize_t n;
    while ((n = ::recv(fd_, buf, sizeof buf, 0)) > 0) {
      for (size_t off = 0; off + sizeof(nlmsghdr) <= static_cast<size_t>(n);) {
        const auto* h = reinterpret_cast<const nlmsghdr*>(buf + off);
        if (h->nlmsg_len < sizeof(nlmsghdr) || off + h->nlmsg_len > static_cast<size_t>(n)) break;
        if (h->nlmsg_type == RTM_DELROUTE) out.push_back("del");
        if (h->nlmsg_type == RTM_NEWROUTE) out.push_back(h->nlmsg_flags & NLM_F_REPLACE ? "new(replace)" : "new");
        off += NLMSG_ALIGN(h->nlmsg_len);
      }
    }
    return out;
  }

 private:
  int fd_ = -1;
};

TEST_CASE("netlink: installs a host route with gateway, source, proto 211 and a locked rto_min", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  REQUIRE(lab.actuator->Install(Pin(2, 0)).ok());
  nlohmann::json owned = lab.Owned();
  REQUIRE(owned.size() == 1);
  CHECK(owned[0]["dst"] == "10.77.200.2");
  CHECK(owned[0]["gateway"] == "10.77.0.254");
  CHECK(owned[0]["dev"] == "rail0");
  CHECK(owned[0]["prefsrc"] == "10.77.200.1");
  CHECK(owned[0]["metrics"][0]["rto_min"] == 10);
  // Locked, as `ip route ... rto_min 10ms` does: the kernel ignores an unlocked one.
  CHECK(lab.Text("proto 211").find("rto_min lock 10ms") != std::string::npos);

  auto listed = lab.actuator->List();
  REQUIRE(listed.ok());
  CHECK(*listed == std::vector<OwnedRoute>{Pin(2, 0)});

  // A second install of the same destination is refused, not merged.
  Status again = lab.actuator->Install(Pin(2, 1));
  REQUIRE_FALSE(again.ok());
  CHECK(again.code() == ErrorCode::kAlreadyExists);
}

TEST_CASE("netlink: an on-link route (no gateway) and a prefix round-trip", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  OwnedRoute on_link = Pin(2, 1, 0ms);
  on_link.nexthop.gateway = 0;
  OwnedRoute prefix = Pin(0, 0);
  prefix.destination = Ipv4Prefix{A("10.77.64.0"), 20};
  REQUIRE(lab.actuator->Install(on_link).ok());
  REQUIRE(lab.actuator->Install(prefix).ok());
  nlohmann::json owned = lab.Owned();
  REQUIRE(owned.size() == 2);
  CHECK(owned[0]["dst"] == "10.77.64.0/20");
  CHECK(owned[1]["dst"] == "10.77.200.2");
  CHECK_FALSE(owned[1].contains("gateway"));
  CHECK_FALSE(owned[1].contains("metrics"));
  CHECK(owned[1]["scope"] == "link");
  auto listed = lab.actuator->List();
  REQUIRE(listed.ok());
  CHECK(*listed == std::vector<OwnedRoute>{prefix, on_link});
  REQUIRE(lab.actuator->Delete(on_link.destination).ok());
  REQUIRE(lab.actuator->Delete(prefix.destination).ok());
  CHECK(lab.Owned().empty());
}

TEST_CASE("netlink: replace moves a route atomically, without a delete", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  REQUIRE(lab.actuator->Install(Pin(2, 0, 200ms)).ok());
  RouteMonitor monitor(lab.ns);
  REQUIRE(lab.actuator->Replace(Pin(2, 1)).ok());
  CHECK(monitor.Drain() == std::vector<std::string>{"new(replace)"});
  nlohmann::json owned = lab.Owned();
  REQUIRE(owned.size() == 1);
  CHECK(owned[0]["dev"] == "rail1");
  CHECK(owned[0]["gateway"] == "10.77.1.254");
  CHECK(owned[0]["metrics"][0]["rto_min"] == 10);
  // Replace of a destination without a route adds it.
  REQUIRE(lab.actuator->Replace(Pin(3, 0)).ok());
  CHECK(lab.Owned().size() == 2);
}

TEST_CASE("netlink: delete and flush remove owned routes only", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  // Someone else's routes: a static host route and a default route.
  REQUIRE(lab.ns.Ip("route add 10.77.200.9/32 via 10.77.0.254 dev rail0 proto static").exit_code == 0);
  REQUIRE(lab.ns.Ip("route add default via 10.77.1.254 dev rail1").exit_code == 0);
  REQUIRE(lab.actuator->Install(Pin(2, 0)).ok());
  REQUIRE(lab.actuator->Install(Pin(3, 1)).ok());

  Ipv4Prefix foreign{A("10.77.200.9"), 32};
  CHECK(lab.actuator->Delete(foreign).code() == ErrorCode::kNotFound);
  CHECK(lab.actuator->Install(Pin(9, 1)).code() == ErrorCode::kAlreadyExists);
  Status replaced = lab.actuator->Replace(Pin(9, 1));
  CHECK(replaced.code() == ErrorCode::kConflict);
  CHECK(replaced.error().message.find("belongs to protocol 4") != std::string::npos);

  REQUIRE(lab.actuator->Delete(Pin(2, 0).destination).ok());
  CHECK(lab.actuator->Delete(Pin(2, 0).destination).code() == ErrorCode::kNotFound);
  REQUIRE(lab.Owned().size() == 1);
  REQUIRE(FlushOwnedRoutes(*lab.actuator).ok());
  CHECK(lab.Owned().empty());
  std::string all = lab.Text();
  CHECK(all.find("10.77.200.9 via 10.77.0.254 dev rail0 proto static") != std::string::npos);
  CHECK(all.find("default via 10.77.1.254 dev rail1") != std::string::npos);
}

TEST_CASE("netlink: reconcile on start removes a route to a down rail and fixes stale ones", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  // Left behind by a previous run: pins on both rails, one without rto_min.
  REQUIRE(lab.actuator->Install(Pin(2, 0)).ok());
  REQUIRE(lab.ns.Ip("route add 10.77.200.3/32 via 10.77.1.254 dev rail1 src 10.77.200.1 proto 211").exit_code == 0);
  REQUIRE(lab.ns.Ip("route add 10.77.200.9/32 via 10.77.0.254 dev rail0 proto static").exit_code == 0);
  // rail0 loses its carrier (the link's far end goes down): the kernel keeps
  // routes on it (linkdown) but traffic on them is lost.
  REQUIRE(lab.ns.Ip("link set rail0p down").exit_code == 0);
  auto interfaces = lab.actuator->Interfaces();
  REQUIRE(interfaces.ok());
  CHECK(UpInterfaces(*interfaces) == std::set<std::string>{"lo", "rail1", "rail1p"});  // not rail0, rail0p

  std::vector<OwnedRoute> desired = {Pin(2, 0), Pin(3, 1)};
  auto plan = ReconcileRoutes(*lab.actuator, desired);
  REQUIRE(plan.ok());
  CHECK(plan->blocked == std::vector<OwnedRoute>{Pin(2, 0)});
  nlohmann::json owned = lab.Owned();
  REQUIRE(owned.size() == 1);
  CHECK(owned[0]["dst"] == "10.77.200.3");
  CHECK(owned[0]["metrics"][0]["rto_min"] == 10);
  CHECK(lab.Text().find("10.77.200.9 via 10.77.0.254 dev rail0 proto static") != std::string::npos);

  // Converged: the next pass changes nothing.
  plan = ReconcileRoutes(*lab.actuator, desired);
  REQUIRE(plan.ok());
  CHECK(plan->empty());
}

TEST_CASE("netlink: errors say what was wrong", "[daemonset][netns]") {
  SKIP_UNLESS_ROOT();
  Lab lab;
  OwnedRoute no_dev = Pin(2, 0);
  no_dev.nexthop.interface = "rail7";
  Status s = lab.actuator->Install(no_dev);
  CHECK(s.code() == ErrorCode::kNotFound);
  CHECK(s.error().message.find("no such interface \"rail7\"") != std::string::npos);

  OwnedRoute off_subnet = Pin(2, 0);
  off_subnet.nexthop.gateway = A("10.99.0.254");
  s = lab.actuator->Install(off_subnet);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  // The kernel's own words (extended ack) are in the message.
  CHECK(s.error().message.find("installing 10.77.200.2/32 via 10.99.0.254 dev rail0") == 0);
  CHECK(s.error().message.find("Nexthop has invalid gateway") != std::string::npos);

  // Without CAP_NET_ADMIN (dropped on one thread only: capabilities are per thread).
  s = lab.ns.Inside([&] {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    ::syscall(SYS_capget, &hdr, data);
    data[0].effective &= ~(1u << CAP_NET_ADMIN);
    if (::syscall(SYS_capset, &hdr, data) != 0) return Status(Internal("capset failed"));
    return lab.actuator->Install(Pin(2, 0));
  });
  CHECK(s.code() == ErrorCode::kUnauthorized);
  CHECK(s.error().message.find("needs CAP_NET_ADMIN") != std::string::npos);
  CHECK(lab.Owned().empty());
}

}  // namespace
}  // namespace lockstep::agent
