#include "lockstep/common/result.h"

namespace lockstep {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kConflict: return "Conflict";
    case ErrorCode::kGone: return "Gone";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kUnauthorized: return "Unauthorized";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

}  // namespace lockstep
