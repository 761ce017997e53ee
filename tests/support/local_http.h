// LocalHttp: one blocking HTTP request to 127.0.0.1:<port> with libcurl, for the
// tests of the project's own servers (HttpServer, the coordinator). Returns the
// status (0 on a transport error) and the body. The timeout is generous: tests
// assert outcomes, not speed. Thread-safe (one curl handle per call).
#pragma once

#include <curl/curl.h>

#include <cstddef>
#include <string>

namespace lockstep {

// A CURLOPT_WRITEFUNCTION appending to the std::string given as CURLOPT_WRITEDATA.
inline size_t AppendToString(char* p, size_t s, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, s * n);
  return s * n;
}

struct LocalReply {
  long status = 0;
  std::string body;
};

// POSTs `post` when it is non-empty or a `method` is given (e.g. "PUT"); GET otherwise.
inline LocalReply LocalHttp(int port, const std::string& path, const std::string& post = {},
                            const char* method = nullptr, long timeout_s = 20) {
  LocalReply r;
  CURL* c = curl_easy_init();
  if (!c) return r;
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  if (!post.empty() || method) curl_easy_setopt(c, CURLOPT_POSTFIELDS, post.c_str());
  if (method) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(c);
  return r;
}

}  // namespace lockstep
