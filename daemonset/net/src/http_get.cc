#include "lockstep/agent/net/http_get.h"

#include <curl/curl.h>

#include <memory>

namespace lockstep::agent {
namespace {

constexpr size_t kMaxBody = 1u << 20;

size_t Collect(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > kMaxBody) return 0;  // makes curl fail with CURLE_WRITE_ERROR
  body->append(data, size * n);
  return size * n;
}

}  // namespace

Result<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                          std::chrono::milliseconds timeout) {
  // curl_global_init is done once, thread-safely, by the first curl_easy_init.
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Internal("curl_easy_init failed");
  const bool v6 = host.find(':') != std::string::npos;
  const std::string where = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  const std::string url = "http://" + where + path;
  HttpReply reply;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // a local agent is never behind a proxy
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  CURLcode rc = curl_easy_perform(c);
  switch (rc) {
    case CURLE_OK:
      break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return Unavailable("cannot connect to " + where + ": " + curl_easy_strerror(rc) +
                         " (is the agent running, and is this its timeApiAddr?)");
    case CURLE_OPERATION_TIMEDOUT:
      return Unavailable("timed out talking to " + where + " after " + std::to_string(timeout.count()) + " ms");
    case CURLE_WRITE_ERROR:
      return Internal("reply from " + where + " is larger than 1 MiB");
    default:
      return Unavailable("GET " + url + ": " + curl_easy_strerror(rc));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  reply.status = static_cast<int>(status);
  return reply;
}

}  // namespace lockstep::agent
