#include "http_status.h"

#include <nlohmann/json.hpp>

namespace lockstep::kube::internal {

ErrorCode CodeForHttpStatus(long http_status, const std::string& reason) {
  switch (http_status) {
    case 404: return ErrorCode::kNotFound;
    case 409: return reason == "AlreadyExists" ? ErrorCode::kAlreadyExists : ErrorCode::kConflict;
    case 410: return ErrorCode::kGone;
    case 401:
    case 403: return ErrorCode::kUnauthorized;
    case 400:
    case 422: return ErrorCode::kInvalidArgument;
    default: return ErrorCode::kUnavailable;
  }
}

Error MapHttpError(long http_status, const std::string& body, const std::string& what) {
  std::string reason, message;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (auto it = j.find("reason"); it != j.end() && it->is_string()) reason = it->get<std::string>();
    if (auto it = j.find("message"); it != j.end() && it->is_string()) message = it->get<std::string>();
  }
  if (message.empty() && !body.empty()) {
    message = body.substr(0, 256);
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
  }
  std::string text = what + ": HTTP " + std::to_string(http_status);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + message;
  return Error{CodeForHttpStatus(http_status, reason), std::move(text)};
}

}  // namespace lockstep::kube::internal
