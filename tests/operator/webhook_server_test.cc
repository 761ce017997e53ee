// The mutating admission webhook: MutatePodAdmission on AdmissionReviews
// shaped like the API server's, and the HTTPS server itself with a real TLS
// client (asio + OpenSSL) trusting only the server's self-signed certificate
// (made here, as the chart makes one with genCA/genSignedCert).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/webhook_server.h"

namespace lockstep::op {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

void AddProtectedJob(kube::Store& s) {
  Json tj = {{"metadata", {{"name", "llama"}, {"namespace", "ml"}}},
             {"spec", {{"replicas", 4}, {"trainJobRef", {{"name", "llama"}}}}}};
  s.Upsert("ml/llama", std::make_shared<const Json>(tj));
}

Json TrainerPod(int index) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", "llama-node-0-" + std::to_string(index) + "-"},
            {"namespace", "ml"},
            {"labels",
             {{"jobset.sigs.k8s.io/jobset-name", "llama"},
              {"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
          {"spec", {{"containers", Json::array({{{"name", "node"}, {"image", "torch:1"}}})}}}};
}

Json Review(const Json& pod, const std::string& operation = "CREATE") {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", {{"uid", "req-1"}, {"operation", operation}, {"namespace", "ml"}, {"object", pod}}}};
}

std::string Unbase64(const std::string& in) {
  std::string out(in.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  REQUIRE(n >= 0);
  size_t pad = 0;
  for (auto it = in.rbegin(); it != in.rend() && *it == '='; ++it) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Env(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e["name"] == name) return e.contains("value") ? e["value"].get<std::string>() : e["valueFrom"].dump();
  }
  return "<unset>";
}

// A self-signed certificate for 127.0.0.1, written as PEM files.
struct TestCert {
  std::string dir, cert, key;
  TestCert() {
    char tmpl[] = "/tmp/lockstep-webhook-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    dir = tmpl;
    cert = dir + "/tls.crt";
    key = dir + "/tls.key";
    EVP_PKEY* pkey = EVP_EC_gen("P-256");
    REQUIRE(pkey);
    X509* x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pkey);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("lockstep-webhook"), -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
    for (auto [nid, value] : std::vector<std::pair<int, const char*>>{{NID_subject_alt_name, "IP:127.0.0.1"},
                                                                      {NID_basic_constraints, "critical,CA:TRUE"}}) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
      REQUIRE(ext);
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    }
    REQUIRE(X509_sign(x, pkey, EVP_sha256()) > 0);
    FILE* f = std::fopen(cert.c_str(), "w");
    PEM_write_X509(f, x);
    std::fclose(f);
    f = std::fopen(key.c_str(), "w");
    PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    X509_free(x);
    EVP_PKEY_free(pkey);
  }
  ~TestCert() {
    std::remove(cert.c_str());
    std::remove(key.c_str());
    ::rmdir(dir.c_str());
  }
};

// POSTs `body` to https://127.0.0.1:port/target, trusting only `ca`.
std::pair<int, std::string> Post(int port, const std::string& ca, const std::string& target, const std::string& body) {
  asio::io_context io;
  asio::ssl::context tls(asio::ssl::context::tls_client);
  tls.load_verify_file(ca);
  tls.set_verify_mode(asio::ssl::verify_peer);
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  asio::ssl::stream<asio::ip::tcp::socket&> stream(socket, tls);
  stream.set_verify_callback(asio::ssl::host_name_verification("127.0.0.1"));
  stream.handshake(asio::ssl::stream_base::client);
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return {static_cast<int>(res.result_int()), res.body()};
}

}  // namespace

TEST_CASE("webhook: a rank pod of a protected TrainJob gets the labels and the library's environment",
          "[operator][webhook]") {
  kube::Store jobs;
  AddProtectedJob(jobs);
  const Json pod = TrainerPod(3);
  auto out = MutatePodAdmission(Review(pod), jobs);
  REQUIRE(out.ok());
  const Json& res = (*out)["response"];
  CHECK((*out)["apiVersion"] == "admission.k8s.io/v1");
  CHECK(res["uid"] == "req-1");
  CHECK(res["allowed"] == true);
  REQUIRE(res["patchType"] == "JSONPatch");
  const Json patched = pod.patch(Json::parse(Unbase64(res["patch"].get<std::string>())));
  CHECK(patched["metadata"]["labels"]["lockstep.dev/job"] == "llama");
  CHECK(patched["metadata"]["labels"]["lockstep.dev/role"] == "rank");
  CHECK(patched["metadata"]["labels"]["lockstep.dev/rank"] == "3");
  const Json& c = patched["spec"]["containers"][0];
  CHECK(Env(c, "LOCKSTEP_COORDINATOR") == "http://llama-coordinator.ml.svc:8470");
  CHECK(Env(c, "LOCKSTEP_ROLE") == "rank");
  CHECK(Env(c, "LOCKSTEP_RANK") == "3");
  CHECK(Env(c, "LOCKSTEP_WORLD_SIZE") == "4");
  CHECK(Env(c, "LOCKSTEP_POD_UID").find("metadata.uid") != std::string::npos);
}

TEST_CASE("webhook: other pods, unprotected jobs and other operations pass unchanged", "[operator][webhook]") {
  kube::Store jobs;
  AddProtectedJob(jobs);
  kube::Store none;
  auto plain = [&](const Json& review, const kube::Store& s) {
    auto out = MutatePodAdmission(review, s);
    REQUIRE(out.ok());
    CHECK((*out)["response"]["allowed"] == true);
    CHECK_FALSE((*out)["response"].contains("patch"));
  };
  plain(Review(TrainerPod(0)), none);  // no TrainingJob references the TrainJob
  plain(Review(Json{{"metadata", {{"labels", {{"app", "web"}}}}}, {"spec", Json::object()}}), jobs);
  plain(Review(TrainerPod(0), "UPDATE"), jobs);
  Json no_rank = TrainerPod(0);
  no_rank["metadata"]["labels"].erase("batch.kubernetes.io/job-completion-index");
  auto warned = MutatePodAdmission(Review(no_rank), jobs);
  CHECK_FALSE((*warned)["response"].contains("patch"));
  CHECK((*warned)["response"]["warnings"][0].get<std::string>().find("has no rank") != std::string::npos);
  CHECK_FALSE(MutatePodAdmission(Json{{"kind", "AdmissionReview"}}, jobs).ok());
}

TEST_CASE("webhook: a TrainJob pod as Trainer v2.3 makes it (the ancestor label only on its Job) is a rank, an "
          "initializer's is not",
          "[operator][webhook]") {
  kube::Store jobs;
  AddProtectedJob(jobs);
  Json pod = TrainerPod(2);
  pod["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-ancestor-step");
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] = "node";
  auto out = MutatePodAdmission(Review(pod), jobs);
  REQUIRE(out.ok());
  REQUIRE((*out)["response"].contains("patch"));
  const Json patched = pod.patch(Json::parse(Unbase64((*out)["response"]["patch"].get<std::string>())));
  CHECK(patched["metadata"]["labels"]["lockstep.dev/rank"] == "2");
  Json init = pod;
  init["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] = "dataset-initializer";
  auto passed = MutatePodAdmission(Review(init), jobs);
  REQUIRE(passed.ok());
  CHECK((*passed)["response"]["allowed"] == true);
  CHECK_FALSE((*passed)["response"].contains("patch"));
}

TEST_CASE("webhook: with coordinator pod IPs the rank gets the coordinator pod's URL, or is refused until it has one",
          "[operator][webhook]") {
  kube::Store jobs;
  AddProtectedJob(jobs);
  std::string ip_url;
  std::vector<std::string> asked;
  CoordinatorUrlLookup lookup = [&](const std::string& ns, const std::string& tj) {
    asked.push_back(ns + "/" + tj);
    return ip_url;
  };
  auto refused = MutatePodAdmission(Review(TrainerPod(1)), jobs, lookup);
  REQUIRE(refused.ok());
  CHECK((*refused)["response"]["allowed"] == false);
  CHECK((*refused)["response"]["status"]["code"] == 503);
  CHECK((*refused)["response"]["status"]["message"].get<std::string>().find("TrainingJob ml/llama has no pod IP") !=
        std::string::npos);
  CHECK_FALSE((*refused)["response"].contains("patch"));
  ip_url = "http://10.244.1.7:8470";
  auto out = MutatePodAdmission(Review(TrainerPod(1)), jobs, lookup);
  REQUIRE(out.ok());
  CHECK((*out)["response"]["allowed"] == true);
  const Json patched = TrainerPod(1).patch(Json::parse(Unbase64((*out)["response"]["patch"].get<std::string>())));
  CHECK(Env(patched["spec"]["containers"][0], "LOCKSTEP_COORDINATOR") == "http://10.244.1.7:8470");
  CHECK(asked == std::vector<std::string>{"ml/llama", "ml/llama"});
  // A pod of no protected job never asks (and is never refused).
  kube::Store none;
  auto plain = MutatePodAdmission(Review(TrainerPod(1)), none, lookup);
  CHECK((*plain)["response"]["allowed"] == true);
  CHECK(asked.size() == 2);
}

TEST_CASE("webhook server: answers an AdmissionReview over TLS with its certificate", "[operator][webhook]") {
  TestCert cert;
  kube::Store jobs;
  AddProtectedJob(jobs);
  WebhookServer server({.cert_file = cert.cert, .key_file = cert.key},
                       [&](const Json& review) { return MutatePodAdmission(review, jobs); });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(server.port() > 0);

  auto [status, body] = Post(server.port(), cert.cert, "/mutate-pods", Review(TrainerPod(1)).dump());
  CHECK(status == 200);
  const Json res = Json::parse(body)["response"];
  CHECK(res["allowed"] == true);
  const Json patched = TrainerPod(1).patch(Json::parse(Unbase64(res["patch"].get<std::string>())));
  CHECK(patched["metadata"]["labels"]["lockstep.dev/rank"] == "1");

  auto [bad_status, bad_body] = Post(server.port(), cert.cert, "/mutate-pods", "not json");
  CHECK(bad_status == 400);
  CHECK(Post(server.port(), cert.cert, "/other", "{}").first == 404);
  CHECK(server.served() == 1);

  // A client that does not trust the certificate fails the handshake.
  TestCert other;
  CHECK_THROWS(Post(server.port(), other.cert, "/mutate-pods", "{}"));
  server.Stop();
}

TEST_CASE("webhook server: a missing certificate file is named", "[operator][webhook]") {
  WebhookServer server({.cert_file = "/nonexistent/tls.crt", .key_file = "/nonexistent/tls.key"},
                       [](const Json&) -> Result<Json> { return Json::object(); });
  auto s = server.Start("127.0.0.1", 0);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("/nonexistent/tls.crt") != std::string::npos);
}

}  // namespace lockstep::op
