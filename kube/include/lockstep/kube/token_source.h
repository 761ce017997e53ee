// TokenSource: the bearer token for API requests. Either static, or read from
// a file and re-read every `reread_interval` (bound ServiceAccount tokens are
// rotated by the kubelet roughly hourly). A failed re-read keeps the last good
// token and retries on the next call. Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::kube {

class TokenSource {
 public:
  // No token (client certificates or anonymous): Token() returns "".
  TokenSource() = default;
  static TokenSource Static(std::string token);
  // REQUIRES: `clock` outlives this object.
  static TokenSource FromFile(std::string path, Clock& clock,
                              Nanos reread_interval = std::chrono::minutes(1));

  TokenSource(const TokenSource& o);
  TokenSource& operator=(const TokenSource& o);

  // The current token. Errors only if the file has never been read successfully.
  Result<std::string> Token();

 private:
  mutable std::mutex mu_;
  std::string token_;         // GUARDED_BY(mu_)
  std::string path_;          // "" for a static token
  Clock* clock_ = nullptr;
  Nanos reread_interval_{0};
  bool loaded_ = false;       // GUARDED_BY(mu_)
  MonoTime next_read_{};      // GUARDED_BY(mu_)
};

}  // namespace lockstep::kube
