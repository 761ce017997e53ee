#include "lockstep/kube/kube_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "file_util.h"

namespace lockstep::kube {
namespace {

namespace fs = std::filesystem;
using internal::Base64Decode;
using internal::ReadFile;
using internal::Trim;

// Finds the entry named `name` in a kubeconfig list (clusters/users/contexts).
YAML::Node FindEntry(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& item : list) {
    if (item.IsMap() && item["name"] && item["name"].as<std::string>("") == name) return item;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The `field` map (e.g. "cluster") of the entry named `name`.
YAML::Node FindNamed(const YAML::Node& list, const std::string& name, const char* field) {
  YAML::Node entry = FindEntry(list, name);
  if (!entry) return entry;
  return entry[field];
}

std::string Str(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap() || !map[key] || !map[key].IsScalar()) return "";
  return map[key].as<std::string>("");
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(base_dir) / p).lexically_normal().string();
}

Status DecodeInto(const YAML::Node& map, const char* key, std::string& out, const std::string& where) {
  std::string b64 = Str(map, key);
  if (b64.empty()) return Status::Ok();
  auto decoded = Base64Decode(b64);
  if (!decoded) return InvalidArgument(where + ": " + key + " is not valid base64");
  out = std::move(*decoded);
  return Status::Ok();
}

Result<KubeConfig> ParseKubeConfig(const YAML::Node& root, const std::string& path, const std::string& context) {
  const std::string where = "kubeconfig \"" + path + "\"";
  if (!root.IsMap()) return InvalidArgument(where + ": not a YAML mapping");
  std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
  if (ctx_name.empty()) return InvalidArgument(where + ": no current-context set; pass --context");
  YAML::Node ctx = FindNamed(root["contexts"], ctx_name, "context");
  if (!ctx || !ctx.IsMap()) return InvalidArgument(where + ": context \"" + ctx_name + "\" not found");
  std::string cluster_name = Str(ctx, "cluster"), user_name = Str(ctx, "user");
  YAML::Node cluster = FindNamed(root["clusters"], cluster_name, "cluster");
  if (!cluster || !cluster.IsMap()) {
    return InvalidArgument(where + ": cluster \"" + cluster_name + "\" (context \"" + ctx_name + "\") not found");
  }
  std::string base_dir = fs::path(path).parent_path().string();
  KubeConfig c;
  c.source = where + " context \"" + ctx_name + "\"";
  c.server = Str(cluster, "server");
  if (c.server.empty()) return InvalidArgument(where + ": cluster \"" + cluster_name + "\" has no server");
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  c.ca_file = Resolve(base_dir, Str(cluster, "certificate-authority"));
  if (auto s = DecodeInto(cluster, "certificate-authority-data", c.ca_pem, where); !s) return s.error();
  c.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
  if (std::string ns = Str(ctx, "namespace"); !ns.empty()) c.default_namespace = ns;

  if (!user_name.empty()) {
    YAML::Node entry = FindEntry(root["users"], user_name);
    if (!entry) return InvalidArgument(where + ": user \"" + user_name + "\" not found");
    YAML::Node user = entry["user"];
    if (!user || !user.IsMap()) return c;  // an empty user: anonymous
    c.token = Str(user, "token");
    c.token_file = Resolve(base_dir, Str(user, "tokenFile"));
    c.client_cert_file = Resolve(base_dir, Str(user, "client-certificate"));
    c.client_key_file = Resolve(base_dir, Str(user, "client-key"));
    if (auto s = DecodeInto(user, "client-certificate-data", c.client_cert_pem, where); !s) return s.error();
    if (auto s = DecodeInto(user, "client-key-data", c.client_key_pem, where); !s) return s.error();
    bool has_cred = !c.token.empty() || !c.token_file.empty() || !c.client_cert_file.empty() ||
                    !c.client_cert_pem.empty();
    if (!has_cred && (user["exec"] || user["auth-provider"])) {
      return InvalidArgument(where + ": user \"" + user_name +
                             "\" uses exec/auth-provider credentials, which lockstep does not support; "
                             "use a token, tokenFile or client certificate");
    }
  }
  return c;
}

}  // namespace

Result<KubeConfig> LoadKubeConfigFile(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text) return text.error();
  try {
    YAML::Node root = YAML::Load(*text);
    return ParseKubeConfig(root, path, context);
  } catch (const std::exception& e) {
    return InvalidArgument("kubeconfig \"" + path + "\": " + e.what());
  }
}

Result<KubeConfig> InClusterConfig(const std::string& host, const std::string& port, const std::string& sa_dir) {
  if (host.empty() || port.empty()) {
    return NotFound("not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)");
  }
  KubeConfig c;
  c.source = "in-cluster (" + sa_dir + ")";
  bool ipv6 = host.find(':') != std::string::npos;
  c.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  c.token_file = sa_dir + "/token";
  c.ca_file = sa_dir + "/ca.crt";
  auto token = ReadFile(c.token_file);
  if (!token) return token.error();
  if (auto ns = ReadFile(sa_dir + "/namespace"); ns.ok() && !Trim(*ns).empty()) c.default_namespace = Trim(*ns);
  return c;
}

Result<KubeConfig> LoadInClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  return InClusterConfig(host ? host : "", port ? port : "", sa_dir);
}

Result<KubeConfig> TokenFileConfig(const std::string& server, const std::string& ca_file,
                                   const std::string& token_file) {
  if (server.empty()) return InvalidArgument("--server is required with --token-file");
  if (server.rfind("https://", 0) != 0 && server.rfind("http://", 0) != 0) {
    return InvalidArgument("--server must start with https:// or http:// (got \"" + server + "\")");
  }
  auto token = ReadFile(token_file);
  if (!token) return InvalidArgument("--token-file: " + token.error().message);
  KubeConfig c;
  c.source = "flags (--server " + server + ")";
  c.server = server;
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  c.ca_file = ca_file;
  c.token_file = token_file;
  return c;
}

Result<KubeConfig> LoadDefaultConfig(const ConfigFlags& flags) {
  Result<KubeConfig> r = NotFound("no Kubernetes configuration");
  if (!flags.server.empty() && !flags.token_file.empty()) {
    r = TokenFileConfig(flags.server, flags.ca_file, flags.token_file);
  } else if (!flags.kubeconfig.empty()) {
    r = LoadKubeConfigFile(flags.kubeconfig, flags.context);
  } else if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string first(env);
    first = first.substr(0, first.find(':'));
    r = LoadKubeConfigFile(first, flags.context);
  } else {
    r = LoadInClusterConfig();
    if (!r && r.code() == ErrorCode::kNotFound) {
      const char* home = std::getenv("HOME");
      if (home != nullptr) r = LoadKubeConfigFile(std::string(home) + "/.kube/config", flags.context);
      if (!r && r.code() == ErrorCode::kNotFound) {
        return NotFound("no Kubernetes configuration: pass --kubeconfig or --server/--token-file, set "
                        "KUBECONFIG, or run in a cluster");
      }
    }
  }
  if (r.ok()) {
    if (!flags.ca_file.empty()) r->ca_file = flags.ca_file;
    if (flags.insecure_skip_tls_verify) r->insecure_skip_tls_verify = true;
  }
  return r;
}

}  // namespace lockstep::kube
