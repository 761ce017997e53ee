#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "lockstep/kube/kube_config.h"
#include "lockstep/kube/token_source.h"
#include "temp_dir.h"

namespace lockstep::kube {
namespace {

using testing::TempDir;

// base64("CA PEM") etc.
constexpr const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: kind-lockstep
clusters:
- name: kind-lockstep
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: Q0EgUEVN
- name: other
  cluster:
    server: https://10.0.0.1:443
    certificate-authority: certs/ca.crt
    insecure-skip-tls-verify: true
contexts:
- name: kind-lockstep
  context:
    cluster: kind-lockstep
    user: kind-admin
- name: sa
  context:
    cluster: other
    user: sa-user
    namespace: lockstep
- name: broken
  context:
    cluster: nowhere
    user: kind-admin
- name: exec
  context:
    cluster: other
    user: exec-user
users:
- name: kind-admin
  user:
    client-certificate-data: Q0VSVCBQRU0=
    client-key-data: S0VZIFBFTQ==
- name: sa-user
  user:
    tokenFile: token
- name: exec-user
  user:
    exec:
      command: aws
)";

TEST_CASE("kubeconfig: current context with inline certificate data", "[kube][config]") {
  TempDir dir;
  std::string path = dir.Write("config", kKubeconfig);
  auto c = LoadKubeConfigFile(path);
  REQUIRE(c.ok());
  CHECK(c->server == "https://127.0.0.1:6443");  // trailing slash dropped
  CHECK(c->ca_pem == "CA PEM");
  CHECK(c->client_cert_pem == "CERT PEM");
  CHECK(c->client_key_pem == "KEY PEM");
  CHECK(c->token.empty());
  CHECK(c->default_namespace == "default");
  CHECK_FALSE(c->insecure_skip_tls_verify);
}

TEST_CASE("kubeconfig: explicit context, relative paths, namespace", "[kube][config]") {
  TempDir dir;
  std::string path = dir.Write("sub/config", kKubeconfig);
  auto c = LoadKubeConfigFile(path, "sa");
  REQUIRE(c.ok());
  CHECK(c->server == "https://10.0.0.1:443");
  CHECK(c->ca_file == dir.path() + "/sub/certs/ca.crt");
  CHECK(c->token_file == dir.path() + "/sub/token");
  CHECK(c->insecure_skip_tls_verify);
  CHECK(c->default_namespace == "lockstep");
}

TEST_CASE("kubeconfig: errors are InvalidArgument or NotFound with context", "[kube][config]") {
  TempDir dir;
  std::string path = dir.Write("config", kKubeconfig);
  auto missing_ctx = LoadKubeConfigFile(path, "nope");
  REQUIRE_FALSE(missing_ctx.ok());
  CHECK(missing_ctx.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(missing_ctx.error().message, Catch::Contains("context \"nope\" not found"));
  auto broken = LoadKubeConfigFile(path, "broken");
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(broken.error().message, Catch::Contains("cluster \"nowhere\""));
  auto exec = LoadKubeConfigFile(path, "exec");
  REQUIRE_FALSE(exec.ok());
  CHECK_THAT(exec.error().message, Catch::Contains("exec"));
  CHECK(LoadKubeConfigFile(dir.path() + "/absent").code() == ErrorCode::kNotFound);
  std::string bad = dir.Write("bad", "clusters: [unclosed");
  CHECK(LoadKubeConfigFile(bad).code() == ErrorCode::kInvalidArgument);
  std::string bad64 = dir.Write("bad64", R"(current-context: c
contexts: [{name: c, context: {cluster: k}}]
clusters: [{name: k, cluster: {server: "https://x", certificate-authority-data: "!!!"}}]
)");
  CHECK(LoadKubeConfigFile(bad64).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("in-cluster config reads the ServiceAccount directory", "[kube][config]") {
  TempDir dir;
  dir.Write("sa/token", "tok-1\n");
  dir.Write("sa/ca.crt", "CA");
  dir.Write("sa/namespace", "lockstep-system");
  auto c = InClusterConfig("10.96.0.1", "443", dir.path() + "/sa");
  REQUIRE(c.ok());
  CHECK(c->server == "https://10.96.0.1:443");
  CHECK(c->token_file == dir.path() + "/sa/token");
  CHECK(c->ca_file == dir.path() + "/sa/ca.crt");
  CHECK(c->default_namespace == "lockstep-system");
  auto v6 = InClusterConfig("fd00::1", "443", dir.path() + "/sa");
  REQUIRE(v6.ok());
  CHECK(v6->server == "https://[fd00::1]:443");
  CHECK(InClusterConfig("", "", dir.path() + "/sa").code() == ErrorCode::kNotFound);
  CHECK(InClusterConfig("10.96.0.1", "443", dir.path() + "/none").code() == ErrorCode::kNotFound);
}

TEST_CASE("token-file config from flags", "[kube][config]") {
  TempDir dir;
  std::string token = dir.Write("token", "abc");
  auto c = TokenFileConfig("https://127.0.0.1:6443", "/ca.crt", token);
  REQUIRE(c.ok());
  CHECK(c->token_file == token);
  CHECK(c->ca_file == "/ca.crt");
  CHECK(TokenFileConfig("", "", token).code() == ErrorCode::kInvalidArgument);
  CHECK(TokenFileConfig("127.0.0.1:6443", "", token).code() == ErrorCode::kInvalidArgument);
  CHECK(TokenFileConfig("https://x", "", dir.path() + "/none").code() == ErrorCode::kInvalidArgument);
  ConfigFlags flags;
  flags.server = "https://127.0.0.1:6443";
  flags.token_file = token;
  flags.insecure_skip_tls_verify = true;
  auto d = LoadDefaultConfig(flags);
  REQUIRE(d.ok());
  CHECK(d->insecure_skip_tls_verify);
  CHECK(d->server == "https://127.0.0.1:6443");
}

TEST_CASE("token source re-reads a rotating token file", "[kube][config]") {
  TempDir dir;
  FakeClock clock;
  std::string path = dir.Write("token", "first\n");
  TokenSource ts = TokenSource::FromFile(path, clock, std::chrono::seconds(60));
  CHECK(*ts.Token() == "first");
  dir.Write("token", "second");
  CHECK(*ts.Token() == "first");  // cached until the interval passes
  clock.Advance(std::chrono::seconds(61));
  CHECK(*ts.Token() == "second");
  std::filesystem::remove(path);
  clock.Advance(std::chrono::seconds(61));
  CHECK(*ts.Token() == "second");  // a failed re-read keeps the last token
  TokenSource missing = TokenSource::FromFile(dir.path() + "/none", clock);
  CHECK(missing.Token().code() == ErrorCode::kUnauthorized);
  CHECK(*TokenSource::Static("s").Token() == "s");
  CHECK(TokenSource().Token()->empty());
}

}  // namespace
}  // namespace lockstep::kube
