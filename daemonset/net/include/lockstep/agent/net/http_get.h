// HttpGet: a blocking HTTP GET over libcurl for `lockstep-agent clock status`,
// the time client and tests (plain HTTP, no redirects, body up to 1 MiB).
// `host` is an IPv4 or IPv6 literal or a name. Thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct HttpReply {
  int status = 0;
  std::string body;
};

// `timeout` bounds the whole exchange (connect, send, receive).
Result<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

}  // namespace lockstep::agent
