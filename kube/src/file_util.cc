#include "file_util.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lockstep::kube::internal {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string msg = "cannot read \"" + path + "\": " + std::strerror(err);
    if (err == ENOENT) return NotFound(msg);
    return Unavailable(msg);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Unavailable("error reading \"" + path + "\"");
  return ss.str();
}

Result<std::string> Base64Decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() * 3 / 4);
  unsigned buf = 0;
  int bits = 0;
  bool padding = false;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') { padding = true; continue; }
    int v = value(c);
    if (v < 0 || padding) return InvalidArgument("invalid base64 data");
    buf = (buf << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xFF);
    }
  }
  if (bits >= 6) return InvalidArgument("invalid base64 data (truncated)");
  return out;
}

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace lockstep::kube::internal
