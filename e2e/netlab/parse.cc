#include "netlab/parse.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <regex>

namespace lockstep::netlab {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

double Multiplier(const std::string& prefix) {
  if (prefix == "k") return 1e3;
  if (prefix == "m") return 1e6;
  if (prefix == "g") return 1e9;
  return 1;
}

}  // namespace

Result<double> ParseRate(const std::string& s) {
  static const std::regex re(R"(^(\d+(?:\.\d+)?)([kmg]?)(bit|bps)?$)");
  std::smatch m;
  const std::string low = Lower(s);
  if (!std::regex_match(low, m, re)) return InvalidArgument("bad rate " + Quoted(s) + " (e.g. 100mbit)");
  return std::stod(m[1].str()) * Multiplier(m[2].str());
}

Result<double> ParseSize(const std::string& s) {
  static const std::regex re(R"(^(\d+(?:\.\d+)?)([kmg]?)(b|bit)?$)");
  std::smatch m;
  const std::string low = Lower(s);
  if (!std::regex_match(low, m, re)) return InvalidArgument("bad size " + Quoted(s));
  return std::stod(m[1].str()) * Multiplier(m[2].str()) / (m[3].str() == "bit" ? 8 : 1);
}

Result<PortRange> ParsePortRange(const std::string& spec) {
  const auto dash = spec.find('-');
  const std::string lo = spec.substr(0, dash);
  const std::string hi = dash == std::string::npos ? lo : spec.substr(dash + 1);
  // Seven digits are already out of range; the limit keeps stoi from overflowing.
  const auto port = [](const std::string& p) { return AllDigits(p) && p.size() < 8 ? std::stoi(p) : -1; };
  PortRange r{port(lo), port(hi)};
  if (r.lo < 0 || r.hi < 0 || r.lo > r.hi || r.hi > 65535 || r.hi - r.lo >= 4096) {
    return InvalidArgument("bad port or range " + Quoted(spec) + " (e.g. 40000 or 40000-40063)");
  }
  return r;
}

Result<long long> ParseInt(const std::string& s) {
  const std::string digits = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? s.substr(1) : s;
  if (!AllDigits(digits)) return InvalidArgument("not an integer");
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return InvalidArgument("integer out of range");
  return v;
}

Result<double> ParseFloat(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return InvalidArgument("not a number");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return InvalidArgument("not a number");
  return v;
}

std::string Quoted(const std::string& s) {
  // Python's repr(): single quotes unless the text has one and no double quote.
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == '\\' || c == q) out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + q;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

std::string Strip(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace lockstep::netlab
