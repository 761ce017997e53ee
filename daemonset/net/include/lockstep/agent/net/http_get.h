// HttpGet: a tiny blocking HTTP/1.0 GET over IPv4 for `lockstep-agent clock
// status` and tests (no TLS, no redirects, body up to 1 MiB). Thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct HttpReply {
  int status = 0;
  std::string body;
};

Result<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

}  // namespace lockstep::agent
