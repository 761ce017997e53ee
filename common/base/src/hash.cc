#include "lockstep/common/hash.h"

#include <cstdio>

namespace lockstep {

std::string StableHash(std::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(Fnv1a64(data)));
  return buf;
}

}  // namespace lockstep
