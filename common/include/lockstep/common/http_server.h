// HttpServer: a minimal HTTP/1.1 server for /metrics, /healthz, /readyz and
// small local JSON APIs. One thread accepts and serves requests one at a time
// with Connection: close; handlers must be quick. Not for untrusted bulk traffic:
// request heads over 16 KiB and bodies over 1 MiB are rejected.
// Thread-safe: Handle() before Start(); Stop() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

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

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer() = default;
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler for an exact path. REQUIRES: before Start().
  void Handle(const std::string& path, Handler handler);

  // Binds host:port (port 0 picks a free port; see port()) and starts serving.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }

 private:
  void Serve();
  void ServeOne(int fd);

  std::map<std::string, Handler> handlers_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace lockstep
