#include "lockstep/agent/route.h"

#include <arpa/inet.h>

#include <charconv>

namespace lockstep::agent {

Result<uint32_t> ParseIpv4(std::string_view text) {
  std::string s(text);
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return InvalidArgument("\"" + s + "\" is not an IPv4 address");
  return ntohl(a.s_addr);
}

std::string FormatIpv4(uint32_t address) {
  in_addr a{htonl(address)};
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

Result<Ipv4Prefix> Ipv4Prefix::Parse(std::string_view text) {
  std::string_view addr = text;
  int length = 32;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    std::string_view len = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(len.data(), len.data() + len.size(), length);
    if (ec != std::errc() || end != len.data() + len.size() || length < 0 || length > 32) {
      return InvalidArgument("\"" + std::string(text) + "\": the prefix length must be 0-32");
    }
  }
  auto a = ParseIpv4(addr);
  if (!a.ok()) return a.error();
  uint32_t mask = length == 0 ? 0 : ~uint32_t{0} << (32 - length);
  if ((*a & ~mask) != 0) {
    return InvalidArgument("\"" + std::string(text) + "\" has host bits set (did you mean " +
                           FormatIpv4(*a & mask) + "/" + std::to_string(length) + "?)");
  }
  return Ipv4Prefix{*a, static_cast<uint8_t>(length)};
}

std::string Ipv4Prefix::ToString() const { return FormatIpv4(address) + "/" + std::to_string(length); }

std::string OwnedRoute::ToString() const {
  std::string s = destination.ToString();
  if (nexthop.gateway != 0) s += " via " + FormatIpv4(nexthop.gateway);
  s += " dev " + nexthop.interface;
  if (nexthop.onlink) s += " onlink";
  if (source != 0) s += " src " + FormatIpv4(source);
  if (rto_min.count() != 0) s += " rto_min " + std::to_string(rto_min.count()) + "ms";
  return s;
}

}  // namespace lockstep::agent
