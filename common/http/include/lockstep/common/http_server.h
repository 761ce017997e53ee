// HttpServer: a small HTTP/1.1 server for /metrics, /healthz, /readyz and
// small local JSON APIs, on Boost.Beast over Boost.Asio (event-driven: an idle
// or slow connection costs a socket, not a thread).
//
// Against slow or idle clients, each request has one deadline that covers
// reading it, running the handler and writing the response (send timeouts are
// part of it); a keep-alive connection waiting for its next request is held to
// the same deadline. Open connections are capped: beyond the cap new ones are
// closed at once. Request heads over 16 KiB and bodies over 1 MiB are rejected.
// A handler that throws yields a 500; the server keeps serving.
//
// Handlers run on the server's I/O threads and must be quick (no blocking I/O):
// a handler that blocks holds an I/O thread and delays Stop().
// Thread-safe: Handle() before Start(); Stop() from any thread, promptly
// closing every connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep {

struct HttpRequest {
  std::string method;
  std::string path;   // without the query string
  std::string query;  // after '?', undecoded
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  // Whole request: from waiting for its first byte to the last byte of the
  // response. A client that drips bytes or stops reading is cut off here.
  std::chrono::milliseconds request_timeout{5000};
  // Connections beyond this are accepted and closed at once.
  size_t max_connections = 128;
  // I/O threads (handlers run on them).
  int threads = 2;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer();
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler for an exact path. REQUIRES: before Start().
  void Handle(const std::string& path, Handler handler);

  // Binds host:port (IPv4 or IPv6 literal; port 0 picks a free port, see
  // port()) and starts serving. REQUIRES: called once.
  Status Start(const std::string& host, int port);
  // Stops accepting, closes every connection and joins the I/O threads.
  // Idempotent. REQUIRES: not called from a handler.
  void Stop();
  int port() const { return port_; }

 private:
  struct Impl;

  HttpServerOptions options_;
  std::map<std::string, Handler> handlers_;
  std::mutex stop_mu_;  // serialises Start() and Stop()
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace lockstep
