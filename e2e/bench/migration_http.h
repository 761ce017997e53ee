// Plain HTTP/JSON calls (libcurl) from the migration benchmark to the
// lockstep-coordinator on loopback. Each call is one blocking request with a
// timeout. Not thread-safe (one caller at a time).
#pragma once

#include <string>

namespace lockstep::bench::migration {

struct HttpReply {
  long status = 0;  // 0: no answer (connection refused, timeout)
  std::string body;
};

// method "GET" or "POST"; body sent as application/json when non-empty.
HttpReply HttpCall(const std::string& method, const std::string& url, const std::string& body = "",
                   double timeout_s = 3.0);

}  // namespace lockstep::bench::migration
