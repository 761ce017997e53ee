// EnsureProbeKeySecret: makes sure the Secret holding the agents' shared probe
// key exists, so that the Helm chart renders no key material (a render is then
// the same every time, under `helm template` and GitOps as under `helm install`).
//
//  - Present: left alone, never overwritten (a user rotates the key by
//    replacing data.key; the agents reload it and still accept the previous
//    key). It must have data.key of 16-4096 bytes, as the agents require.
//  - Absent: created with 32 bytes from `random` in data.key. If another
//    operator replica creates it first, theirs is kept.
//
// Needs RBAC get on the Secret's name and, to create it, create on secrets in
// the namespace (the chart grants create unless probeKey.existingSecret is set).
// Stateless; thread-safe as far as `api` and `random` are.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "lockstep/common/result.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::op {

// Returns `n` random bytes or an error. OsRandomBytes is the real source.
using RandomBytes = std::function<Result<std::string>(std::size_t n)>;

// The kernel's CSPRNG (getrandom(2)).
Result<std::string> OsRandomBytes(std::size_t n);

inline constexpr std::size_t kProbeKeyBytes = 32;

// Errors: kUnauthorized with what RBAC to grant or Secret to create;
// kInvalidArgument when the existing Secret has no usable data.key;
// kUnavailable (retry) for API errors.
Status EnsureProbeKeySecret(kube::KubeApi& api, const std::string& ns, const std::string& name,
                            const RandomBytes& random);

}  // namespace lockstep::op
