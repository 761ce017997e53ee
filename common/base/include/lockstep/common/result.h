// Result<T>: a value or an Error{code, message}. Errors are values; no exception
// crosses a module boundary. Thread-compatible (like any value type).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lockstep {

enum class ErrorCode {
  kInvalidArgument,  // user or configuration error: do not retry
  kNotFound,
  kAlreadyExists,
  kConflict,         // optimistic-concurrency failure: re-read and retry
  kGone,             // resourceVersion too old: relist
  kUnavailable,      // transient network/API error: retry with backoff
  kUnauthorized,     // 401/403
  kInternal,         // invariant violation or unexpected response
};

const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
  std::string ToString() const { return std::string(ErrorCodeName(code)) + ": " + message; }
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok()
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  // REQUIRES: !ok()
  const Error& error() const { assert(!ok()); return std::get<1>(v_); }
  ErrorCode code() const { return error().code; }

 private:
  std::variant<T, Error> v_;
};

// Status: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status Ok() { return Status(); }
  template <typename T>
  static Status FromResult(const Result<T>& r) { return r.ok() ? Status() : Status(r.error()); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return error_; }
  ErrorCode code() const { return error().code; }

 private:
  Error error_{ErrorCode::kInternal, ""};
  bool ok_ = true;
};

inline Error InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Error NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Error Conflict(std::string m) { return {ErrorCode::kConflict, std::move(m)}; }
inline Error Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Error Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

}  // namespace lockstep
