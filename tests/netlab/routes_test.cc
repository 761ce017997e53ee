#include <catch2/catch.hpp>

#include <algorithm>

#include "netlab/routes.h"

namespace lockstep::netlab {
namespace {

using Lines = std::vector<std::string>;

Topology Lab4() { return BuildTopology("lab", 0, "10.77.0.0/16", {4, 2, 2, 2}, "striped", "/run/netlab/lab"); }

const NsCommands& For(const std::vector<NsCommands>& all, const std::string& ns) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const NsCommands& c) { return c.ns == ns; });
  REQUIRE(it != all.end());
  return *it;
}

// The lines about rail addresses only (what the Python netlab generated),
// without the host-address routes and groups (10.77.200.x, ids 2000+).
Lines RailOnly(const Lines& all) {
  Lines out;
  for (const auto& l : all) {
    if (l.find("10.77.200.") == std::string::npos && l.find("id 20") == std::string::npos) out.push_back(l);
  }
  return out;
}

TEST_CASE("converge: one entry per namespace, hosts then leaves then spines", "[netlab]") {
  const auto all = ConvergeCommands(Lab4(), LabState{});
  Lines order;
  for (const auto& c : all) order.push_back(c.ns);
  CHECK(order == Lines{"lab-h0", "lab-h1", "lab-h2", "lab-h3", "lab-l0", "lab-l1", "lab-s0", "lab-s1"});
}

TEST_CASE("converge: host rail routes and per-rail source tables", "[netlab]") {
  const auto all = ConvergeCommands(Lab4(), LabState{});
  const auto& h0 = For(all, "lab-h0");
  CHECK(h0.apply == Lines{
                        "route replace 10.77.0.0/24 via 10.77.100.1 dev rail0 onlink src 10.77.0.1 proto static",
                        "route replace 10.77.0.0/16 via 10.77.100.1 dev rail0 onlink src 10.77.0.1 table 100 proto static",
                        "route replace 10.77.1.0/24 via 10.77.100.2 dev rail1 onlink src 10.77.1.1 proto static",
                        "route replace 10.77.0.0/16 via 10.77.100.2 dev rail1 onlink src 10.77.1.1 table 101 proto static",
                        "route replace 10.77.200.0/24 src 10.77.200.1 proto static"
                        " nexthop via 10.77.100.1 dev rail0 onlink nexthop via 10.77.100.2 dev rail1 onlink",
                    });
  CHECK(h0.cleanup.empty());
}

TEST_CASE("converge: host addresses, all links up: leaves deliver directly, spines to both leaves", "[netlab]") {
  const auto all = ConvergeCommands(Lab4(), LabState{});
  const auto& l0 = For(all, "lab-l0");
  const auto has = [](const NsCommands& c, const std::string& line) {
    return std::count(c.apply.begin(), c.apply.end(), line) == 1;
  };
  // h0 rail0 and h1 rail1 hang off l0 (striped).
  CHECK(has(l0, "route replace 10.77.200.1/32 via 10.77.0.1 dev h0r0 onlink proto static"));
  CHECK(has(l0, "route replace 10.77.200.2/32 via 10.77.1.2 dev h1r1 onlink proto static"));
  CHECK(std::count(l0.cleanup.begin(), l0.cleanup.end(), "nexthop del id 2000") == 1);
  const auto& s0 = For(all, "lab-s0");
  CHECK(has(s0, "nexthop replace id 2000 group 1/2"));
  CHECK(has(s0, "route replace 10.77.200.1/32 nhid 2000 proto static"));
}

TEST_CASE("converge: host address follows the host's live links", "[netlab]") {
  LabState s;
  s.links = {{"h0r0", "down"}, {"l1s1", "down"}};
  const auto all = ConvergeCommands(Lab4(), s);
  const auto has = [](const NsCommands& c, const std::string& line) {
    return std::count(c.apply.begin(), c.apply.end(), line) == 1;
  };
  // l0 lost its link to h0: over the spines that still reach l1 (only s0).
  const auto& l0 = For(all, "lab-l0");
  CHECK(has(l0, "nexthop replace id 2000 group 1"));
  CHECK(has(l0, "route replace 10.77.200.1/32 nhid 2000 proto static"));
  // l1 still has h0 rail1.
  CHECK(has(For(all, "lab-l1"), "route replace 10.77.200.1/32 via 10.77.1.1 dev h0r1 onlink proto static"));
  // s0 sends h0's address to l1 only; s1 lost l1, so it has no way to h0.
  CHECK(has(For(all, "lab-s0"), "nexthop replace id 2000 group 2"));
  const auto& s1 = For(all, "lab-s1");
  CHECK(has(s1, "route replace unreachable 10.77.200.1/32 proto static"));
  CHECK(std::count(s1.cleanup.begin(), s1.cleanup.end(), "nexthop del id 2000") == 1);
  // A silent link keeps its advertisement.
  LabState silent;
  silent.links = {{"h0r0", "silent"}};
  const auto quiet = ConvergeCommands(Lab4(), silent);
  CHECK(has(For(quiet, "lab-l0"),
            "route replace 10.77.200.1/32 via 10.77.0.1 dev h0r0 onlink proto static"));
}

TEST_CASE("converge: one rail, the host route has a single nexthop", "[netlab]") {
  const Topology t = BuildTopology("lab", 0, "10.77.0.0/16", {2, 1, 1, 1}, "striped", "/run/netlab/lab");
  const auto all = ConvergeCommands(t, LabState{});
  const auto& h1 = For(all, "lab-h1");
  CHECK(h1.apply.back() == "route replace 10.77.200.0/24 via 10.77.100.1 dev rail0 onlink src 10.77.200.2 proto static");
}

TEST_CASE("converge: all links up, every leaf spreads over both spines", "[netlab]") {
  const auto all = ConvergeCommands(Lab4(), LabState{});
  const auto& l0 = For(all, "lab-l0");
  CHECK(l0.apply[0] == "nexthop replace id 1 via 10.77.128.0 dev s0");
  CHECK(l0.apply[1] == "nexthop replace id 2 via 10.77.128.2 dev s1");
  CHECK(l0.apply[2] == "nexthop replace id 1001 group 1/2");
  CHECK(RailOnly(l0.cleanup).empty());
  CHECK(RailOnly(For(all, "lab-s1").cleanup).empty());
}

// The expected lines are what the Python netlab generated for this state.
TEST_CASE("converge: leaf-spine link down, host rail down, silent link", "[netlab]") {
  LabState s;
  s.links = {{"l0s1", "down"}, {"h1r0", "down"}, {"h2r1", "silent"}};
  const auto all = ConvergeCommands(Lab4(), s);

  const auto& l0 = For(all, "lab-l0");
  CHECK(RailOnly(l0.apply) == Lines{
                        "nexthop replace id 1 via 10.77.128.0 dev s0",
                        "nexthop replace id 1001 group 1",
                        "route replace 10.77.0.1/32 dev h0r0 scope link proto static",
                        "route replace 10.77.1.1/32 nhid 1001 proto static",
                        "route replace unreachable 10.77.0.2/32 proto static",
                        "route replace 10.77.1.2/32 dev h1r1 scope link proto static",
                        "route replace 10.77.0.3/32 dev h2r0 scope link proto static",
                        "route replace 10.77.1.3/32 nhid 1001 proto static",
                        "route replace 10.77.0.4/32 nhid 1001 proto static",
                        "route replace 10.77.1.4/32 dev h3r1 scope link proto static",
                    });
  CHECK(RailOnly(l0.cleanup) == Lines{"nexthop del id 2"});

  const auto& l1 = For(all, "lab-l1");
  CHECK(RailOnly(l1.apply) == Lines{
                        "nexthop replace id 1 via 10.77.129.0 dev s0",
                        "nexthop replace id 2 via 10.77.129.2 dev s1",
                        "nexthop replace id 1000 group 1",
                        "route replace 10.77.0.1/32 nhid 1000 proto static",
                        "route replace 10.77.1.1/32 dev h0r1 scope link proto static",
                        "route replace unreachable 10.77.0.2/32 proto static",
                        "route replace 10.77.1.2/32 nhid 1000 proto static",
                        "route replace 10.77.0.3/32 nhid 1000 proto static",
                        "route replace 10.77.1.3/32 dev h2r1 scope link proto static",
                        "route replace 10.77.0.4/32 dev h3r0 scope link proto static",
                        "route replace 10.77.1.4/32 nhid 1000 proto static",
                    });
  CHECK(RailOnly(l1.cleanup).empty());

  const auto& s1 = For(all, "lab-s1");
  CHECK(RailOnly(s1.apply) == Lines{
                        "nexthop replace id 2 via 10.77.129.3 dev l1",
                        "route replace unreachable 10.77.0.1/32 proto static",
                        "route replace 10.77.1.1/32 nhid 2 proto static",
                        "route replace unreachable 10.77.0.2/32 proto static",
                        "route replace unreachable 10.77.1.2/32 proto static",
                        "route replace unreachable 10.77.0.3/32 proto static",
                        "route replace 10.77.1.3/32 nhid 2 proto static",
                        "route replace 10.77.0.4/32 nhid 2 proto static",
                        "route replace unreachable 10.77.1.4/32 proto static",
                    });
  CHECK(RailOnly(s1.cleanup) == Lines{"nexthop del id 1"});
}

TEST_CASE("converge: a leaf cut off from every spine is unreachable from the others", "[netlab]") {
  LabState s;
  s.links = {{"l0s0", "down"}, {"l0s1", "down"}};
  const auto all = ConvergeCommands(Lab4(), s);
  const auto& l1 = For(all, "lab-l1");
  CHECK(RailOnly(l1.cleanup) == Lines{"nexthop del id 1000"});
  CHECK(std::count(l1.apply.begin(), l1.apply.end(), "route replace unreachable 10.77.0.1/32 proto static") == 1);
  CHECK(RailOnly(For(all, "lab-l0").cleanup) == Lines{"nexthop del id 1", "nexthop del id 2", "nexthop del id 1001"});
}

TEST_CASE("build: namespaces, veths, addresses and source rules", "[netlab]") {
  const Topology t = Lab4();
  CHECK(NetnsAddCommands(t).front() == "netns add lab-h0");
  CHECK(VethCommands(t).front() == "link add rail0 netns lab-h0 type veth peer name h0r0 netns lab-l0");
  CHECK(VethCommands(t).back() == "link add s1 netns lab-l1 type veth peer name l1 netns lab-s1");
  const auto addrs = AddressCommands(t);
  CHECK(For(addrs, "lab-h0").apply == Lines{"link set lo up", "addr add 10.77.0.1/32 dev rail0", "link set rail0 up",
                                            "addr add 10.77.1.1/32 dev rail1", "link set rail1 up",
                                            "rule add from 10.77.0.1 lookup 100 pref 1000",
                                            "rule add from 10.77.1.1 lookup 101 pref 1001",
                                            "link add host0 type dummy", "addr add 10.77.200.1/32 dev host0",
                                            "link set host0 up"});
  CHECK(For(AddressCommands(t, "ifb"), "lab-h3").apply[7] == "link add host0 type ifb");
  CHECK(For(addrs, "lab-s0").apply ==
        Lines{"link set lo up", "addr add 10.77.128.0/31 dev l0", "link set l0 up", "addr add 10.77.129.0/31 dev l1",
              "link set l1 up"});
}

TEST_CASE("sysctls: hosts do not forward, routers hash the 5-tuple", "[netlab]") {
  using P = std::pair<std::string, std::string>;
  const Sysctls host = HostSysctls();
  CHECK(std::count(host.begin(), host.end(), P{"net.ipv4.ip_forward", "0"}) == 1);
  CHECK(std::count(host.begin(), host.end(), P{"net.ipv4.conf.all.ignore_routes_with_linkdown", "0"}) == 1);
  Topology t = Lab4();
  t.hash_seed = 7;
  Sysctls router = RouterSysctls(t, true);
  CHECK(router[router.size() - 4] == std::pair<std::string, std::string>{"net.ipv4.ip_forward", "1"});
  CHECK(router[router.size() - 2] == std::pair<std::string, std::string>{"net.ipv4.fib_multipath_hash_fields", "0x37"});
  CHECK(router.back() == std::pair<std::string, std::string>{"net.ipv4.fib_multipath_hash_seed", "7"});
  t.hash_policy = 1;
  router = RouterSysctls(t, false);
  CHECK(router.back() == std::pair<std::string, std::string>{"net.ipv4.fib_multipath_hash_policy", "1"});
}

TEST_CASE("silent failure: both ends point at a MAC nobody has", "[netlab]") {
  const Topology t = Lab4();
  const Link& lk = *FindLink(t, "l0s1");
  using P = std::pair<std::string, std::string>;
  CHECK(SilentCommands(lk, true) ==
        std::vector<P>{{"lab-l0", "neigh replace 10.77.128.2 lladdr 02:00:5e:00:53:ff dev s1 nud permanent"},
                       {"lab-s1", "neigh replace 10.77.128.3 lladdr 02:00:5e:00:53:ff dev l0 nud permanent"}});
  CHECK(SilentCommands(lk, false) ==
        std::vector<P>{{"lab-l0", "neigh del 10.77.128.2 dev s1"}, {"lab-s1", "neigh del 10.77.128.3 dev l0"}});
}

TEST_CASE("silent failure one way: only the sending end's entry is poisoned, both are forgotten", "[netlab]") {
  const Topology t = Lab4();
  const Link& lk = *FindLink(t, "l0s1");
  using P = std::pair<std::string, std::string>;
  CHECK(SilentCommands(lk, true, "up") ==
        std::vector<P>{{"lab-l0", "neigh replace 10.77.128.2 lladdr 02:00:5e:00:53:ff dev s1 nud permanent"}});
  CHECK(SilentCommands(lk, true, "down") ==
        std::vector<P>{{"lab-s1", "neigh replace 10.77.128.3 lladdr 02:00:5e:00:53:ff dev l0 nud permanent"}});
  CHECK(SilentCommands(lk, false, "up") == SilentCommands(lk, false));
}

}  // namespace
}  // namespace lockstep::netlab
