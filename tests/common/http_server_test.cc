#include <curl/curl.h>

#include <catch2/catch.hpp>

#include "lockstep/common/http_server.h"

namespace lockstep {
namespace {

size_t Collect(char* p, size_t s, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, s * n);
  return s * n;
}

// Performs one request against the server; returns {status, body}.
std::pair<long, std::string> Fetch(int port, const std::string& path, const std::string& post = {}) {
  CURL* c = curl_easy_init();
  std::string body;
  std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  if (!post.empty()) curl_easy_setopt(c, CURLOPT_POSTFIELDS, post.c_str());
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  return {code, body};
}

TEST_CASE("HttpServer serves registered paths on a port it picked", "[common]") {
  HttpServer server;
  server.Handle("/healthz", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok\n"}; });
  server.Handle("/echo", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", r.method + " " + r.query + " " + r.body};
  });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(server.port() > 0);
  REQUIRE(Fetch(server.port(), "/healthz") == std::make_pair(200L, std::string("ok\n")));
  REQUIRE(Fetch(server.port(), "/echo?a=1", "hello") == std::make_pair(200L, std::string("POST a=1 hello")));
  REQUIRE(Fetch(server.port(), "/missing").first == 404);
  server.Stop();
}

TEST_CASE("HttpServer rejects a bad bind address with a clear error", "[common]") {
  HttpServer server;
  Status s = server.Start("not-an-ip", 0);
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.error().message.find("not-an-ip") != std::string::npos);
}

}  // namespace
}  // namespace lockstep
