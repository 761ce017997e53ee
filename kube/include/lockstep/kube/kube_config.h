// KubeConfig: where the API server is and how to authenticate to it, loaded
// from a kubeconfig file, from the in-cluster ServiceAccount mount, or from
// explicit flags (server + CA file + token file). Values only: loading reads
// files once; TokenSource (token_source.h) re-reads rotating token files.
// Functions are thread-safe (LoadDefaultConfig reads the environment).
#pragma once

#include <string>

#include "lockstep/common/result.h"

namespace lockstep::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  std::string server{};  // "https://10.96.0.1:443"
  // Trust: a PEM file, or PEM bytes (decoded certificate-authority-data).
  std::string ca_file{};
  std::string ca_pem{};
  // Client certificate authentication: files or PEM bytes.
  std::string client_cert_file{};
  std::string client_cert_pem{};
  std::string client_key_file{};
  std::string client_key_pem{};
  // Bearer token: a static token, or a file re-read periodically.
  std::string token{};
  std::string token_file{};
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";
  std::string source{};  // where this came from, for messages
};

// Parses a kubeconfig file and resolves `context` ("" = current-context).
// Relative file paths are resolved against the kubeconfig's directory.
// Errors: kNotFound (no file), kInvalidArgument (bad YAML, missing context,
// cluster or user, unsupported exec/auth-provider credentials).
Result<KubeConfig> LoadKubeConfigFile(const std::string& path, const std::string& context = "");

// In-cluster config from host/port (KUBERNETES_SERVICE_HOST/PORT) and the
// ServiceAccount directory (token, ca.crt, namespace). IPv6 hosts are bracketed.
Result<KubeConfig> InClusterConfig(const std::string& host, const std::string& port,
                                   const std::string& sa_dir = kServiceAccountDir);
// Same, reading KUBERNETES_SERVICE_HOST/PORT from the environment.
// kNotFound when not running in a cluster.
Result<KubeConfig> LoadInClusterConfig(const std::string& sa_dir = kServiceAccountDir);

// Explicit config, e.g. from --server/--certificate-authority/--token-file.
// An empty ca_file uses the system trust store. REQUIRES: server non-empty;
// token_file readable (checked).
Result<KubeConfig> TokenFileConfig(const std::string& server, const std::string& ca_file,
                                   const std::string& token_file);

// Command-line style selection (what binaries expose as flags).
struct ConfigFlags {
  std::string kubeconfig{};  // --kubeconfig
  std::string context{};     // --context
  std::string server{};      // --server      } used together; take precedence
  std::string token_file{};  // --token-file  } over kubeconfig when both set
  std::string ca_file{};     // --certificate-authority
  bool insecure_skip_tls_verify = false;  // --insecure-skip-tls-verify
};

// Order: --server + --token-file; --kubeconfig; $KUBECONFIG (first path);
// in-cluster; ~/.kube/config. kNotFound when nothing applies.
Result<KubeConfig> LoadDefaultConfig(const ConfigFlags& flags = {});

}  // namespace lockstep::kube
