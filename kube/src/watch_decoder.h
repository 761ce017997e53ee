// WatchDecoder: splits a watch response body (newline-delimited JSON, arriving
// in arbitrary chunks) into WatchEvents. Pure; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lockstep/common/result.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::kube::internal {

// Parses one watch line {"type":..,"object":{..}}. kInternal on malformed JSON.
Result<WatchEvent> ParseWatchEvent(std::string_view line);

// For an ERROR event, the error it carries (the object is a metav1.Status;
// code 410 maps to kGone).
Error WatchErrorEvent(const WatchEvent& ev);

class WatchDecoder {
 public:
  explicit WatchDecoder(size_t max_line = 64u << 20) : max_line_(max_line) {}

  // Appends a chunk and moves every complete, non-blank line into `lines`.
  // Fails (kInternal) once a line exceeds max_line without a newline.
  Status Feed(std::string_view chunk, std::vector<std::string>& lines);
  // At end of stream: the trailing unterminated line, if any, as a final line.
  bool Finish(std::string& last);

 private:
  std::string partial_;
  size_t max_line_;
};

}  // namespace lockstep::kube::internal
