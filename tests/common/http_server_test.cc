#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <stdexcept>
#include <thread>
#include <vector>

#include "local_http.h"
#include "lockstep/common/http_server.h"

namespace lockstep {
namespace {

// Performs one request against the server; returns {status, body}. The
// timeout is generous: these tests assert that requests succeed, not how fast.
std::pair<long, std::string> Fetch(int port, const std::string& path, const std::string& post = {}) {
  LocalReply r = LocalHttp(port, path, post, nullptr, 10);
  return {r.status, std::move(r.body)};
}

// A raw TCP connection to the server (for idle and misbehaving clients).
int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// True when the server closed `fd` (EOF or reset) within `limit`.
bool ClosedByServer(int fd, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

// Sends a request one byte at a time, `gap` apart, until stopped.
class DrippingClient {
 public:
  DrippingClient(int port, std::chrono::milliseconds gap) : fd_(Connect(port)) {
    thread_ = std::thread([this, gap] {
      const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(64, 'a') + "\r\n\r\n";
      std::unique_lock<std::mutex> lock(mu_);
      for (char c : req) {
        if (::send(fd_, &c, 1, MSG_NOSIGNAL) != 1) break;
        ++sent_;
        cv_.notify_all();
        if (cv_.wait_for(lock, gap, [this] { return stop_; })) break;
      }
    });
  }
  ~DrippingClient() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    ::close(fd_);
  }
  void WaitStarted() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return sent_ > 0; });
  }
  int fd() const { return fd_; }

 private:
  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int sent_ = 0;
  std::thread thread_;
};

HttpResponse Ok(const HttpRequest&) { return {200, "text/plain", "ok\n"}; }

TEST_CASE("HttpServer serves registered paths on a port it picked", "[common]") {
  HttpServer server;
  server.Handle("/healthz", Ok);
  server.Handle("/echo", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", r.method + " " + r.query + " " + r.body};
  });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(server.port() > 0);
  REQUIRE(Fetch(server.port(), "/healthz") == std::make_pair(200L, std::string("ok\n")));
  REQUIRE(Fetch(server.port(), "/echo?a=1", "hello") == std::make_pair(200L, std::string("POST a=1 hello")));
  REQUIRE(Fetch(server.port(), "/missing").first == 404);
  server.Stop();
  server.Stop();  // idempotent
}

TEST_CASE("HttpServer rejects a bad bind address with a clear error", "[common]") {
  HttpServer server;
  Status s = server.Start("not-an-ip", 0);
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.error().message.find("not-an-ip") != std::string::npos);
}

TEST_CASE("HttpServer listens on IPv6 loopback", "[common]") {
  HttpServer server;
  server.Handle("/healthz", Ok);
  Status s = server.Start("::1", 0);
  if (!s.ok()) {
    WARN("no IPv6 loopback here, not tested: " << s.error().message);
    return;
  }
  CURL* c = curl_easy_init();
  std::string url = "http://[::1]:" + std::to_string(server.port()) + "/healthz", body;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  REQUIRE(curl_easy_perform(c) == CURLE_OK);
  curl_easy_cleanup(c);
  REQUIRE(body == "ok\n");
}

TEST_CASE("/healthz answers while 64 idle connections and a byte-dripping client are open", "[common]") {
  HttpServer server;
  server.Handle("/healthz", Ok);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(Connect(server.port()));
  // One byte every 1.5 s: the client that made the old server time out every
  // probe.
  DrippingClient drip(server.port(), std::chrono::milliseconds(1500));
  drip.WaitStarted();
  for (int i = 0; i < 5; ++i) REQUIRE(Fetch(server.port(), "/healthz") == std::make_pair(200L, std::string("ok\n")));
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a client that drips its request is cut off at the request deadline", "[common]") {
  HttpServer server({.request_timeout = std::chrono::milliseconds(300)});
  server.Handle("/healthz", Ok);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  DrippingClient drip(server.port(), std::chrono::milliseconds(100));
  REQUIRE(ClosedByServer(drip.fd()));
  int idle = Connect(server.port());  // an idle connection is held to the same deadline
  REQUIRE(ClosedByServer(idle));
  ::close(idle);
  REQUIRE(Fetch(server.port(), "/healthz").first == 200);
}

TEST_CASE("a handler that throws yields 500 and the server keeps serving", "[common]") {
  HttpServer server;
  server.Handle("/boom", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("bug"); });
  server.Handle("/odd", [](const HttpRequest&) -> HttpResponse { throw 42; });
  server.Handle("/healthz", Ok);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(Fetch(server.port(), "/boom").first == 500);
  REQUIRE(Fetch(server.port(), "/odd").first == 500);
  REQUIRE(Fetch(server.port(), "/healthz").first == 200);
}

TEST_CASE("connections beyond the cap are closed at once, and serving resumes below it", "[common]") {
  HttpServer server({.max_connections = 4});
  server.Handle("/healthz", Ok);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(server.port()));
  int over = Connect(server.port());
  REQUIRE(ClosedByServer(over));
  ::close(over);
  for (int fd : idle) ::close(fd);
  // The server notices the closes asynchronously; poll until a slot is free.
  long status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) status = Fetch(server.port(), "/healthz").first;
  REQUIRE(status == 200);
}

TEST_CASE("Stop() returns and closes connections while slow clients are connected", "[common]") {
  HttpServer server({.request_timeout = std::chrono::minutes(10)});
  server.Handle("/healthz", Ok);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  int idle = Connect(server.port());
  DrippingClient drip(server.port(), std::chrono::milliseconds(1500));
  drip.WaitStarted();
  REQUIRE(Fetch(server.port(), "/healthz").first == 200);
  server.Stop();  // would hang here if Stop waited for the clients
  REQUIRE(ClosedByServer(idle));
  REQUIRE(ClosedByServer(drip.fd()));
  ::close(idle);
}

TEST_CASE("oversized request heads and bodies are refused", "[common]") {
  HttpServer server;
  server.Handle("/echo", [](const HttpRequest& r) { return HttpResponse{200, "text/plain", r.body}; });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(Fetch(server.port(), "/echo", std::string(2 << 20, 'x')).first == 413);
  REQUIRE(Fetch(server.port(), "/echo?" + std::string(20000, 'q')).first == 431);
  REQUIRE(Fetch(server.port(), "/echo", "small") == std::make_pair(200L, std::string("small")));
}

}  // namespace
}  // namespace lockstep
