// Small parsers for netlab's command line (rates, sizes, port ranges) and
// the text helpers the rest of netlab shares.
#pragma once

#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::netlab {

// "100mbit", "1.5g", "800k" -> bits per second (no suffix: bits).
Result<double> ParseRate(const std::string& s);

// "16kb", "1500", "64kbit" -> bytes.
Result<double> ParseSize(const std::string& s);

// "40000" or "40000-40063" (inclusive, at most 4096 ports).
struct PortRange {
  int lo = 0, hi = 0;
};
Result<PortRange> ParsePortRange(const std::string& spec);

// A whole string as a decimal integer (optional sign) or a number; the
// errors carry no context, callers add it.
Result<long long> ParseInt(const std::string& s);
Result<double> ParseFloat(const std::string& s);

// s in single quotes, as Python's repr() shows a string in messages.
std::string Quoted(const std::string& s);

bool AllDigits(const std::string& s);  // non-empty, 0-9 only
std::string Join(const std::vector<std::string>& parts, const std::string& sep);
std::string Strip(const std::string& s);  // without leading and trailing whitespace

}  // namespace lockstep::netlab
