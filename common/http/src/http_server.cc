// HttpServer on Boost.Beast: one async session per connection, each on its own
// strand; the io_context runs on options.threads threads. See http_server.h.
#include "lockstep/common/http_server.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace lockstep {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxHead = 16 * 1024;
constexpr size_t kMaxBody = 1024 * 1024;

using Handlers = std::map<std::string, HttpServer::Handler>;

HttpResponse Dispatch(const Handlers& handlers, const HttpRequest& req) {
  auto it = handlers.find(req.path);
  if (it == handlers.end()) return {404, "text/plain", "not found\n"};
  try {
    return it->second(req);
  } catch (const std::exception&) {
    return {500, "text/plain", "internal server error\n"};
  } catch (...) {
    return {500, "text/plain", "internal server error\n"};
  }
}

// One connection: read a request, answer it, repeat while the client keeps
// the connection alive. Every step runs on the session's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Handlers& handlers, std::chrono::milliseconds timeout,
          std::atomic<size_t>& open)
      : stream_(std::move(socket)), handlers_(handlers), timeout_(timeout), open_(open) {}
  ~Session() { open_.fetch_sub(1); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxHead);
    parser_->body_limit(kMaxBody);
    // One deadline for the whole request: reading it, the handler and the
    // response write (the timer is not reset until the next request).
    stream_.expires_after(timeout_);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream) return Close();
    if (ec == http::error::body_limit) return Reply({413, "text/plain", "body too large\n"}, false);
    if (ec == http::error::header_limit) return Reply({431, "text/plain", "request head too large\n"}, false);
    if (ec == beast::error::timeout || ec == net::error::operation_aborted) return;  // stream closed
    if (ec) {
      // A parse error still gets an answer; a socket error ends the session.
      if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
        return Reply({400, "text/plain", "malformed request\n"}, false);
      }
      return;
    }
    http::request<http::string_body> req = parser_->release();
    HttpRequest r;
    r.method = std::string(req.method_string());
    std::string_view target(req.target().data(), req.target().size());
    size_t q = target.find('?');
    r.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
    r.body = std::move(req.body());
    Reply(Dispatch(handlers_, r), req.keep_alive(), req.version());
  }

  void Reply(const HttpResponse& resp, bool keep_alive, unsigned version = 11) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(version);
    res->result(static_cast<unsigned>(resp.status));
    res->set(http::field::content_type, resp.content_type);
    res->body() = resp.body;
    res->keep_alive(keep_alive);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec) return;
      if (!res->keep_alive()) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const Handlers& handlers_;
  const std::chrono::milliseconds timeout_;
  std::atomic<size_t>& open_;
};

}  // namespace

// Members are destroyed in reverse order: the acceptor before the io_context
// (whose destruction frees the pending sessions), the counter last.
struct HttpServer::Impl {
  std::atomic<size_t> open{0};
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  net::steady_timer retry{ioc};
  std::vector<std::thread> threads;

  void Accept(const Handlers& handlers, const HttpServerOptions& options) {
    acceptor->async_accept(net::make_strand(ioc), [this, &handlers, &options](beast::error_code ec,
                                                                               tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;  // acceptor closed by Stop()
      if (ec) {
        // Out of descriptors or similar: retry shortly instead of spinning.
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this, &handlers, &options](beast::error_code wait_ec) {
          if (!wait_ec) Accept(handlers, options);
        });
        return;
      }
      if (open.fetch_add(1) >= options.max_connections) {
        open.fetch_sub(1);
        beast::error_code ignored;
        socket.close(ignored);  // over the cap: close at once rather than queue
      } else {
        std::make_shared<Session>(std::move(socket), handlers, options.request_timeout, open)->Start();
      }
      Accept(handlers, options);
    });
  }
};

HttpServer::HttpServer() : HttpServer(HttpServerOptions{}) {}
HttpServer::HttpServer(HttpServerOptions options) : options_(options) {}
HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(const std::string& path, Handler handler) { handlers_[path] = std::move(handler); }

Status HttpServer::Start(const std::string& host, int port) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (impl_) return Internal("http server: Start() called twice");
  beast::error_code ec;
  net::ip::address addr = net::ip::make_address(host, ec);
  if (ec) return InvalidArgument("http server: bad bind address \"" + host + "\" (want an IPv4 or IPv6 literal)");
  if (port < 0 || port > 65535) return InvalidArgument("http server: port " + std::to_string(port) + " out of range");
  auto impl = std::make_unique<Impl>();
  tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  tcp::acceptor& a = impl->acceptor.emplace(net::make_strand(impl->ioc));
  auto fail = [&](const char* what) {
    return Unavailable("http server: cannot listen on " + host + ":" + std::to_string(port) + ": " + what + ": " +
                       ec.message());
  };
  if (a.open(ep.protocol(), ec); ec) return fail("open");
  if (a.set_option(net::socket_base::reuse_address(true), ec); ec) return fail("SO_REUSEADDR");
  if (a.bind(ep, ec); ec) return fail("bind");
  if (a.listen(net::socket_base::max_listen_connections, ec); ec) return fail("listen");
  port_ = a.local_endpoint(ec).port();
  impl_ = std::move(impl);
  impl_->Accept(handlers_, options_);
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc.run(); });
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!impl_) return;
  // Pending accepts and sessions are dropped with the io_context, without
  // running: no handler starts after this point.
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_.reset();  // frees every session: their sockets close
}

}  // namespace lockstep
