#include "watch_decoder.h"

#include "http_status.h"

namespace lockstep::kube::internal {
namespace {
bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }
}  // namespace

Result<WatchEvent> ParseWatchEvent(std::string_view line) {
  Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Internal("watch: malformed event line: " + std::string(line.substr(0, 200)));
  auto type = j.find("type");
  auto object = j.find("object");
  if (type == j.end() || !type->is_string() || object == j.end()) {
    return Internal("watch: event without type/object: " + std::string(line.substr(0, 200)));
  }
  return WatchEvent{type->get<std::string>(), std::move(*object)};
}

Error WatchErrorEvent(const WatchEvent& ev) {
  long code = 500;
  std::string reason, message;
  if (ev.object.is_object()) {
    if (auto it = ev.object.find("code"); it != ev.object.end() && it->is_number_integer()) code = it->get<long>();
    if (auto it = ev.object.find("reason"); it != ev.object.end() && it->is_string()) reason = it->get<std::string>();
    if (auto it = ev.object.find("message"); it != ev.object.end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  if (reason == "Expired" || reason == "Gone") code = 410;
  std::string text = "watch ERROR event: code " + std::to_string(code);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + message;
  return Error{CodeForHttpStatus(code, reason), std::move(text)};
}

Status WatchDecoder::Feed(std::string_view chunk, std::vector<std::string>& lines) {
  size_t start = 0;
  while (start < chunk.size()) {
    size_t nl = chunk.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(chunk.substr(start));
      if (partial_.size() > max_line_) {
        partial_.clear();
        return Internal("watch: event larger than " + std::to_string(max_line_) + " bytes");
      }
      break;
    }
    partial_.append(chunk.substr(start, nl - start));
    if (!Blank(partial_)) lines.push_back(std::move(partial_));
    partial_.clear();
    start = nl + 1;
  }
  return Status::Ok();
}

bool WatchDecoder::Finish(std::string& last) {
  if (Blank(partial_)) {
    partial_.clear();
    return false;
  }
  last = std::move(partial_);
  partial_.clear();
  return true;
}

}  // namespace lockstep::kube::internal
