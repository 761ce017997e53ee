#include "lockstep/kube/time_format.h"

#include <cstdio>
#include <ctime>

namespace lockstep::kube {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::seconds;

std::string Format(WallTime t, bool micros) {
  auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  long long secs = us / 1'000'000;
  long long frac = us % 1'000'000;
  if (frac < 0) { frac += 1'000'000; secs -= 1; }
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  if (micros) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

bool Digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::string FormatRfc3339(WallTime t) { return Format(t, false); }
std::string FormatMicroTime(WallTime t) { return Format(t, true); }

Result<WallTime> ParseRfc3339(std::string_view s) {
  auto bad = [&] { return InvalidArgument("invalid RFC 3339 timestamp \"" + std::string(s) + "\""); };
  std::tm tm{};
  int y, mo, d, h, mi, se;
  if (!Digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !Digits(s, 5, 2, mo) || s[7] != '-' ||
      !Digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !Digits(s, 11, 2, h) ||
      s[13] != ':' || !Digits(s, 14, 2, mi) || s[16] != ':' || !Digits(s, 17, 2, se)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return bad();
  size_t pos = 19;
  long long micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 6) micros = micros * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 6; ++i) micros *= 10;
  }
  long long offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!Digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !Digits(s, pos + 4, 2, om)) {
      return bad();
    }
    offset = (oh * 3600LL + om * 60LL) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != s.size()) return bad();
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  long long secs = static_cast<long long>(timegm(&tm)) - offset;
  return WallTime(duration_cast<WallTime::duration>(seconds(secs) + microseconds(micros)));
}

}  // namespace lockstep::kube
