#include "json_reader.h"

namespace lockstep::api {
namespace {

std::string JoinQuoted(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

const Json* JsonReader::Get(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& JsonReader::Object(const Json& obj, const char* key, const std::string& path) {
  static const Json kEmpty = Json::object();
  const Json* v = Get(obj, key);
  if (!v) return kEmpty;
  if (!v->is_object()) {
    Fail(path + " must be an object");
    return kEmpty;
  }
  return *v;
}

const Json& JsonReader::Array(const Json& obj, const char* key, const std::string& path) {
  static const Json kEmpty = Json::array();
  const Json* v = Get(obj, key);
  if (!v) return kEmpty;
  if (!v->is_array()) {
    Fail(path + " must be a list");
    return kEmpty;
  }
  return *v;
}

void JsonReader::Int(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi,
                     int64_t& out) {
  const Json* v = Get(obj, key);
  if (!v) return;
  if (!v->is_number_integer()) {
    return Fail(path + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi) {
    return Fail(path + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " +
                v->dump() + ")");
  }
  out = x;
}

void JsonReader::Int(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi, int& out) {
  int64_t v = out;
  Int(obj, key, path, lo, hi, v);
  out = static_cast<int>(v);
}

void JsonReader::OptInt(const Json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi,
                        std::optional<int64_t>& out) {
  if (!Get(obj, key)) return;
  int64_t v = 0;
  Int(obj, key, path, lo, hi, v);
  if (ok()) out = v;
}

void JsonReader::Bool(const Json& obj, const char* key, const std::string& path, bool& out) {
  const Json* v = Get(obj, key);
  if (!v) return;
  if (!v->is_boolean()) return Fail(path + " must be true or false");
  out = v->get<bool>();
}

void JsonReader::String(const Json& obj, const char* key, const std::string& path, std::string& out,
                        bool allow_empty, size_t max_len) {
  const Json* v = Get(obj, key);
  if (!v) return;
  if (!v->is_string()) return Fail(path + " must be a string");
  const std::string& s = v->get_ref<const std::string&>();
  if (!allow_empty && s.empty()) return Fail(path + " must be a non-empty string");
  if (max_len && s.size() > max_len) {
    return Fail(path + " must be at most " + std::to_string(max_len) + " characters (got " +
                std::to_string(s.size()) + ")");
  }
  out = s;
}

void JsonReader::OptString(const Json& obj, const char* key, const std::string& path,
                           std::optional<std::string>& out, size_t max_len) {
  if (!Get(obj, key)) return;
  std::string s;
  String(obj, key, path, s, true, max_len);
  if (ok()) out = s;
}

void JsonReader::Enum(const Json& obj, const char* key, const std::string& path,
                      const std::vector<std::string>& allowed, std::string& out) {
  const Json* v = Get(obj, key);
  if (!v) return;
  for (const auto& a : allowed) {
    if (v->is_string() && v->get_ref<const std::string&>() == a) {
      out = a;
      return;
    }
  }
  Fail(path + " must be one of " + JoinQuoted(allowed) + " (got " + v->dump() + ")");
}

void JsonReader::OptEnum(const Json& obj, const char* key, const std::string& path,
                         const std::vector<std::string>& allowed, std::optional<std::string>& out) {
  if (!Get(obj, key)) return;
  std::string s;
  Enum(obj, key, path, allowed, s);
  if (ok()) out = s;
}

void JsonReader::Fail(const std::string& what) {
  if (error_.empty()) error_ = context_ + what;
}

}  // namespace lockstep::api
