#include "lockstep/operator/probe_key_secret.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace lockstep::op {
namespace {

// Agents accept keys of this many bytes (ProbeKey::FromBytes).
constexpr std::size_t kMinKeyBytes = 16;
constexpr std::size_t kMaxKeyBytes = 4096;

std::string Base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < in.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, in.size() - i);
    uint32_t v = 0;
    for (std::size_t j = 0; j < 3; ++j) v = (v << 8) | (j < n ? static_cast<unsigned char>(in[i + j]) : 0u);
    for (std::size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(v >> (18 - 6 * j)) & 0x3F] : '=';
  }
  return out;
}

// Decoded size of base64 text (the API server has already validated it).
std::size_t DecodedSize(const std::string& b64) {
  std::size_t pad = 0;
  for (auto it = b64.rbegin(); it != b64.rend() && *it == '=' && pad < 2; ++it) ++pad;
  return b64.size() / 4 * 3 - pad;
}

std::string Where(const std::string& ns, const std::string& name) {
  return "probe key Secret " + ns + "/" + name;
}

Status CheckExisting(const kube::Json& secret, const std::string& ns, const std::string& name) {
  const kube::Json* data = secret.contains("data") ? &secret["data"] : nullptr;
  if (!data || !data->is_object() || !data->contains("key") || !(*data)["key"].is_string()) {
    return InvalidArgument(Where(ns, name) + " has no data.key; put the agents' shared key there (e.g. " +
                           "kubectl -n " + ns + " create secret generic " + name +
                           " --from-file=key=<(head -c 32 /dev/urandom)), or delete the Secret to let the " +
                           "operator generate one");
  }
  const std::size_t size = DecodedSize((*data)["key"].get<std::string>());
  if (size < kMinKeyBytes || size > kMaxKeyBytes) {
    return InvalidArgument(Where(ns, name) + ": data.key holds " + std::to_string(size) +
                           " bytes; the agents need 16 to 4096 (32 random bytes recommended)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> OsRandomBytes(std::size_t n) {
  std::string out(n, '\0');
  std::size_t done = 0;
  while (done < n) {
    ssize_t got = ::getrandom(out.data() + done, n - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Internal(std::string("getrandom: ") + std::strerror(errno));
    }
    done += static_cast<std::size_t>(got);
  }
  return out;
}

Status EnsureProbeKeySecret(kube::KubeApi& api, const std::string& ns, const std::string& name,
                            const RandomBytes& random) {
  auto existing = api.Get(kube::gvr::kSecrets, ns, name);
  if (existing.ok()) return CheckExisting(*existing, ns, name);
  if (existing.code() == ErrorCode::kUnauthorized) {
    return Error{ErrorCode::kUnauthorized, Where(ns, name) + ": the operator may not read it (" +
                                               existing.error().message +
                                               "); grant get on this Secret's name in its Role"};
  }
  if (existing.code() != ErrorCode::kNotFound) {
    return Unavailable(Where(ns, name) + ": " + existing.error().message);
  }

  auto key = random(kProbeKeyBytes);
  if (!key.ok()) return Internal("cannot generate the probe key: " + key.error().message);
  if (key->size() != kProbeKeyBytes) {
    return Internal("cannot generate the probe key: got " + std::to_string(key->size()) + " random bytes");
  }
  kube::Json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels",
         {{"app.kubernetes.io/name", "lockstep"},
          {"app.kubernetes.io/component", "probe-key"},
          {"app.kubernetes.io/part-of", "lockstep"},
          {"app.kubernetes.io/managed-by", "lockstep-operator"}}},
        {"annotations",
         {{"lockstep.dev/description",
           "Shared key that authenticates probe packets between Lockstep agents. Created by the operator when "
           "missing, never overwritten: replace data.key to rotate it (agents accept the previous key)."}}}}},
      {"type", "Opaque"},
      {"data", {{"key", Base64(*key)}}}};
  auto created = api.Create(kube::gvr::kSecrets, ns, secret);
  if (created.ok()) return Status::Ok();
  if (created.code() == ErrorCode::kAlreadyExists) {  // another replica won the race: keep its key
    auto theirs = api.Get(kube::gvr::kSecrets, ns, name);
    if (!theirs.ok()) return Unavailable(Where(ns, name) + ": " + theirs.error().message);
    return CheckExisting(*theirs, ns, name);
  }
  if (created.code() == ErrorCode::kUnauthorized) {
    return Error{ErrorCode::kUnauthorized,
                 Where(ns, name) + " does not exist and the operator may not create it (" +
                     created.error().message + "). Create it with the agents' shared key: kubectl -n " + ns +
                     " create secret generic " + name +
                     " --from-file=key=<(head -c 32 /dev/urandom); or let the operator create it (chart: leave "
                     "probeKey.existingSecret empty)"};
  }
  return Unavailable(Where(ns, name) + ": cannot create it: " + created.error().message);
}

}  // namespace lockstep::op
