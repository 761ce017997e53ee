#include "netlab/shaping.h"

#include <algorithm>

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

std::vector<std::vector<std::string>> ShapeArgvs(const Shaper& s) {
  const std::vector<std::string> tc = {"tc", "-n", s.ns};
  const auto with = [&tc](std::vector<std::string> rest) {
    rest.insert(rest.begin(), tc.begin(), tc.end());
    return rest;
  };
  const std::string rate = std::to_string(s.rate_bps), burst = std::to_string(s.burst_bytes);
  if (s.qdisc == "tbf") {
    return {with({"qdisc", "replace", "dev", s.ifname, "root", "handle", "1:", "tbf", "rate", rate, "burst", burst,
                  "latency", s.latency.value_or("50ms")})};
  }
  return {with({"qdisc", "replace", "dev", s.ifname, "root", "handle", "1:", "htb", "default", "10"}),
          with({"class", "replace", "dev", s.ifname, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil",
                rate, "burst", burst, "quantum", "1514"})};
}

std::vector<std::string> ClearShapeArgv(const Endpoint& e) {
  return {"tc", "-n", e.ns, "qdisc", "del", "dev", e.ifname, "root"};
}

}  // namespace lockstep::netlab
