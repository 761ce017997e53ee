#include "lockstep/kube/token_source.h"

#include "file_util.h"
#include "lockstep/common/log.h"

namespace lockstep::kube {

TokenSource TokenSource::Static(std::string token) {
  TokenSource t;
  t.token_ = std::move(token);
  t.loaded_ = true;
  return t;
}

TokenSource TokenSource::FromFile(std::string path, Clock& clock, Nanos reread_interval) {
  TokenSource t;
  t.path_ = std::move(path);
  t.clock_ = &clock;
  t.reread_interval_ = reread_interval;
  return t;
}

TokenSource::TokenSource(const TokenSource& o) { *this = o; }

TokenSource& TokenSource::operator=(const TokenSource& o) {
  if (this == &o) return *this;
  std::scoped_lock l(mu_, o.mu_);
  token_ = o.token_;
  path_ = o.path_;
  clock_ = o.clock_;
  reread_interval_ = o.reread_interval_;
  loaded_ = o.loaded_;
  next_read_ = o.next_read_;
  return *this;
}

Result<std::string> TokenSource::Token() {
  std::lock_guard l(mu_);
  if (path_.empty()) return token_;
  MonoTime now = clock_->Monotonic();
  if (loaded_ && now < next_read_) return token_;
  auto text = internal::ReadFile(path_);
  if (!text) {
    if (loaded_) {
      log::Warn("token file re-read failed; keeping the previous token",
                {{"path", path_}, {"error", text.error().message}});
      next_read_ = now + reread_interval_;
      return token_;
    }
    return Error{ErrorCode::kUnauthorized, "bearer token: " + text.error().message};
  }
  token_ = internal::Trim(std::move(*text));
  loaded_ = true;
  next_read_ = now + reread_interval_;
  return token_;
}

}  // namespace lockstep::kube
