#include "lockstep/api/validation.h"

#include <regex>

namespace lockstep::api {
namespace {

bool AllDigits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

bool IsDnsLabel(const std::string& s) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, re);
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

bool IsInterfaceName(const std::string& s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (char c : s) {
    if (c == '/' || c == ':' || c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

bool IsIpv4(const std::string& s) {
  int parts = 0;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string p = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!AllDigits(p) || p.size() > 3 || (p.size() > 1 && p[0] == '0') || std::stoi(p) > 255) return false;
    ++parts;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts == 4;
}

Result<HostPort> ParseHostPort(const std::string& text, const std::string& what, int min_port) {
  auto bad = [&] {
    return InvalidArgument(what + " must be \"<IPv4>:<port>\" with port between " + std::to_string(min_port) +
                           " and 65535 (got \"" + text + "\")");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad();
  HostPort hp{text.substr(0, colon), 0};
  std::string port = text.substr(colon + 1);
  if (!AllDigits(port) || port.size() > 5) return bad();
  hp.port = std::stoi(port);
  if (hp.port < min_port || hp.port > 65535 || !IsIpv4(hp.host)) return bad();
  return hp;
}

bool IsLabelValue(const std::string& s) {
  static const std::regex re("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
  return s.size() <= 63 && std::regex_match(s, re);
}

bool IsLabelKey(const std::string& s) {
  std::string name = s;
  if (size_t slash = s.find('/'); slash != std::string::npos) {
    if (!IsDnsSubdomain(s.substr(0, slash))) return false;
    name = s.substr(slash + 1);
  }
  return !name.empty() && IsLabelValue(name);
}

bool IsNonNegativeQuantity(const std::string& s) {
  // resource.Quantity's grammar without a minus sign.
  static const std::regex re(
      R"(\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)");
  return std::regex_match(s, re);
}

bool IsBase64OfSize(const std::string& s, size_t bytes) {
  static const std::regex re("[A-Za-z0-9+/]*={0,2}");
  if (s.size() != (bytes + 2) / 3 * 4 || !std::regex_match(s, re)) return false;
  size_t pad = bytes % 3 == 0 ? 0 : 3 - bytes % 3;
  size_t got = s.size() - s.find_last_not_of('=') - 1;
  if (got != pad) return false;
  // The unused low bits of the last character must be zero (canonical base64).
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t last = kAlphabet.find(s[s.size() - pad - 1]);
  return pad == 0 || (last & (pad == 1 ? 0x3 : 0xF)) == 0;
}

std::string FailoverOrderMessage(const std::string& prefix, int readmit_after_seconds, int max_hold_down_seconds) {
  return prefix + ".maxHoldDownSeconds must be greater than or equal to " + prefix + ".readmitAfterSeconds (got " +
         std::to_string(max_hold_down_seconds) + " < " + std::to_string(readmit_after_seconds) +
         "); raise maxHoldDownSeconds or lower readmitAfterSeconds";
}

}  // namespace lockstep::api
