#include "netlab/shaping.h"

#include <algorithm>
#include <cstdlib>

namespace lockstep::netlab {

std::string ShapeDirection(const std::string& dir) {
  if (dir == "egress") return "up";
  if (dir == "ingress") return "down";
  return dir;
}

std::vector<ShapeEnd> ShapeEnds(const Link& lk, const std::string& dir) {
  std::vector<ShapeEnd> out;
  if (dir == "up" || dir == "both") out.push_back({lk.name + ":up", lk.a});
  if (dir == "down" || dir == "both") out.push_back({lk.name + ":down", lk.b});
  return out;
}

int64_t DefaultBurst(double rate_bps) { return std::max(static_cast<int64_t>(rate_bps / 8 / 1000), int64_t{3028}); }

Shaper MakeShaper(const Endpoint& e, const std::string& qdisc, double rate_bps, int64_t burst_bytes,
                  const std::string& latency) {
  return {e.ns, e.ifname, qdisc, static_cast<int64_t>(rate_bps), burst_bytes,
          qdisc == "tbf" ? std::optional<std::string>(latency) : std::nullopt};
}

int64_t LatencyUs(const std::string& latency) {
  char* end = nullptr;
  const double v = std::strtod(latency.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  if (unit == "us") return static_cast<int64_t>(v);
  if (unit == "s") return static_cast<int64_t>(v * 1e6);
  return static_cast<int64_t>(v * 1e3);  // "ms" (tc's default unit here)
}

int64_t TbfQueueBytes(const Shaper& s) {
  return s.rate_bps / 8 * LatencyUs(s.latency.value_or("50ms")) / 1'000'000 + s.burst_bytes;
}

std::vector<std::vector<std::string>> ShapeArgvs(const Shaper& s) {
  const std::vector<std::string> tc = {"tc", "-n", s.ns};
  const auto with = [&tc](std::vector<std::string> rest) {
    rest.insert(rest.begin(), tc.begin(), tc.end());
    return rest;
  };
  const std::string rate = std::to_string(s.rate_bps), burst = std::to_string(s.burst_bytes);
  // Under the shaper, a strict-priority band for network control (DSCP CS6,
  // as the agents mark their fabric probes), so probes do not wait behind
  // the data they protect. This kernel has no prio/ets qdisc; htb gives the
  // same: of two classes within their rate, the lower `prio` is always
  // dequeued first. Under tbf: an htb child at twice the rate (it never
  // throttles; tbf shapes), classes 10:1 (CS6, by a u32 filter on the DS
  // field) and 10:2 (the rest), each a bfifo as deep as tbf's own queue
  // (rate x latency + burst), so data sees the queue it had before. Under
  // htb: class 1:10 splits into 1:11 (CS6) and 1:12 (default).
  const std::string twice = std::to_string(s.rate_bps * 2);
  // A fresh tree every time (htb cannot be changed in place): the root is
  // first reset to the default qdisc, which drops the old tree.
  std::vector<std::vector<std::string>> out = {
      with({"qdisc", "replace", "dev", s.ifname, "root", "pfifo_fast"})};
  auto band = [&](const std::string& parent, const std::string& classid, const std::string& r,
                  const std::string& prio) {
    out.push_back(with({"class", "replace", "dev", s.ifname, "parent", parent, "classid", classid, "htb", "rate", r,
                        "ceil", r, "burst", burst, "prio", prio, "quantum", "1514"}));
  };
  auto filter = [&](const std::string& parent, const std::string& flowid) {
    out.push_back(with({"filter", "replace", "dev", s.ifname, "parent", parent, "protocol", "ip", "prio", "1",
                        "handle", "800::800", "u32", "match", "ip", "dsfield", "0xc0", "0xfc", "flowid", flowid}));
  };
  if (s.qdisc == "tbf") {
    const std::string limit = std::to_string(TbfQueueBytes(s));
    out.push_back(with({"qdisc", "replace", "dev", s.ifname, "root", "handle", "1:", "tbf", "rate", rate, "burst",
                        burst, "latency", s.latency.value_or("50ms")}));
    out.push_back(with({"qdisc", "replace", "dev", s.ifname, "parent", "1:1", "handle", "10:", "htb", "default", "2"}));
    band("10:", "10:1", twice, "0");
    band("10:", "10:2", twice, "1");
    out.push_back(with({"qdisc", "replace", "dev", s.ifname, "parent", "10:1", "handle", "11:", "bfifo", "limit",
                        limit}));
    out.push_back(with({"qdisc", "replace", "dev", s.ifname, "parent", "10:2", "handle", "12:", "bfifo", "limit",
                        limit}));
    filter("10:", "10:1");
  } else {
    out.push_back(with({"qdisc", "replace", "dev", s.ifname, "root", "handle", "1:", "htb", "default", "12"}));
    out.push_back(with({"class", "replace", "dev", s.ifname, "parent", "1:", "classid", "1:10", "htb", "rate", rate,
                        "ceil", rate, "burst", burst, "quantum", "1514"}));
    band("1:10", "1:11", rate, "0");
    band("1:10", "1:12", rate, "1");
    filter("1:", "1:11");
  }
  return out;
}

std::vector<std::string> ClearShapeArgv(const Endpoint& e) {
  return {"tc", "-n", e.ns, "qdisc", "del", "dev", e.ifname, "root"};
}

}  // namespace lockstep::netlab
