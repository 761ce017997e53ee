// Maps an API server's HTTP error response (status code + metav1.Status body)
// to an Error. Pure; thread-safe.
//   404 -> kNotFound; 409 -> kAlreadyExists (reason AlreadyExists) or kConflict;
//   410 -> kGone; 401/403 -> kUnauthorized; 400/422 -> kInvalidArgument;
//   429, 5xx and anything unexpected -> kUnavailable (retry).
#pragma once

#include <string>

#include "lockstep/common/result.h"

namespace lockstep::kube::internal {

// `what` describes the request, e.g. `create lockstep.dev/v1alpha1 fabricpolicies "default"`.
// The message carries the server's Status.message (or a snippet of the body).
Error MapHttpError(long http_status, const std::string& body, const std::string& what);

// Error code for an HTTP status (as above, without a message).
ErrorCode CodeForHttpStatus(long http_status, const std::string& reason);

}  // namespace lockstep::kube::internal
