// JsonReader: reads typed fields out of a CRD object's JSON with bounds,
// remembering the first error ("<context>: <path> must be ..."). Internal to
// lockstep_api. Absent and null fields keep the caller's default.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::api {

using Json = nlohmann::json;

class JsonReader {
 public:
  explicit JsonReader(std::string context) : context_(std::move(context)) {}

  // The member `key` of `obj` when present and not null, else nullptr.
  static const Json* Get(const Json& obj, const char* key);
  // A nested object (empty when absent); fails when present and not an object.
  const Json& Object(const Json& obj, const char* key, const std::string& path);
  // A list (empty when absent); fails when present and not a list.
  const Json& Array(const Json& obj, const char* key, const std::string& path);

  void Int(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi, int64_t& out);
  void Int(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi, int& out);
  void OptInt(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi,
              std::optional<int64_t>& out);
  void Bool(const Json& obj, const char* key, const std::string& path, bool& out);
  // max_len 0: unbounded. allow_empty false: "" is an error.
  void String(const Json& obj, const char* key, const std::string& path, std::string& out, bool allow_empty = true,
              size_t max_len = 0);
  void OptString(const Json& obj, const char* key, const std::string& path, std::optional<std::string>& out,
                 size_t max_len = 0);
  void Enum(const Json& obj, const char* key, const std::string& path, const std::vector<std::string>& allowed,
            std::string& out);
  void OptEnum(const Json& obj, const char* key, const std::string& path, const std::vector<std::string>& allowed,
               std::optional<std::string>& out);

  void Fail(const std::string& what);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  Status status() const { return ok() ? Status::Ok() : Status(InvalidArgument(error_)); }

 private:
  std::string context_;
  std::string error_;
};

}  // namespace lockstep::api

#include "lockstep/api/condition.h"

namespace lockstep::api {

// Reads status.conditions into `out` through `r` (internal).
void ReadConditions(JsonReader& r, const Json& status, const std::string& path, std::vector<Condition>& out);

}  // namespace lockstep::api
