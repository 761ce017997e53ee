#include "lockstep/operator/webhook_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "lockstep/api/pod_contract.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::op {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxBody = 4 << 20;

std::string Base64(const std::string& in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// The TrainingJob that protects Kubeflow job `owner` in `ns`: the one whose
// trainJobRef / pytorchJobRef names it.
kube::ObjectPtr ProtectingJob(const kube::Store& jobs, const std::string& ns, const KubeflowPodOwner& owner) {
  const char* field = KubeflowRefField(owner.kind);
  auto found = jobs.List([&](const Json& j) {
    return kube::Namespace(j) == ns && kube::GetString(j, {"spec", field, "name"}) == owner.job;
  });
  return found.empty() ? nullptr : found.front();
}

}  // namespace

Result<Json> MutatePodAdmission(const Json& review, const kube::Store& trainingjobs,
                                const CoordinatorUrlLookup& coordinator_url) {
  const Json* request = kube::FindPath(review, {"request"});
  if (!request || !request->is_object() || !request->contains("uid")) {
    return InvalidArgument("not an AdmissionReview: request.uid is missing");
  }
  Json response = {{"uid", (*request)["uid"]}, {"allowed", true}};
  Json out = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
  const Json* pod = kube::FindPath(*request, {"object"});
  if (!pod || !pod->is_object() || kube::GetString(*request, {"operation"}) != "CREATE") return out;
  auto owner = KubeflowJobOfPod(*pod);
  if (!owner) return out;
  std::string ns = kube::GetString(*request, {"namespace"});
  if (ns.empty()) ns = kube::Namespace(*pod);
  kube::ObjectPtr tj = ProtectingJob(trainingjobs, ns, *owner);
  if (!tj) return out;  // not protected (or its TrainingJob not made yet)
  auto rank = KubeflowPodRank(*pod, owner->kind);
  if (!rank) {
    out["response"]["warnings"] =
        Json::array({"lockstep: pod of " + std::string(KubeflowKindName(owner->kind)) + " " + owner->job +
                     " has no rank in its labels; it is not protected by TrainingJob " + kube::Name(*tj)});
    return out;
  }
  const int replicas = static_cast<int>(kube::GetInt(*tj, {"spec", "replicas"}, 1));
  std::string url;
  if (coordinator_url) {
    url = coordinator_url(ns, kube::Name(*tj));
    if (url.empty()) {
      out["response"]["allowed"] = false;
      out["response"]["status"] = {
          {"code", 503},
          {"reason", "ServiceUnavailable"},
          {"message", "lockstep: the coordinator of TrainingJob " + ns + "/" + kube::Name(*tj) +
                          " has no pod IP yet (operator --coordinator-address pod-ip); create the pod again shortly"}};
      return out;
    }
  }
  PodMutationTarget target{kube::Name(*tj), ns, replicas, url};
  if (const Json* spec = kube::FindPath(*tj, {"spec"})) {
    if (auto parsed = api::ParseTrainingJobSpec(kube::Name(*tj), *spec); parsed.ok()) target.detection = parsed->detection;
  }
  const Json patch = PodMutationPatch(*pod, target, *rank);
  out["response"]["patchType"] = "JSONPatch";
  out["response"]["patch"] = Base64(patch.dump());
  return out;
}

struct WebhookServer::Impl {
  asio::io_context io;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{io};
};

WebhookServer::WebhookServer(WebhookServerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

WebhookServer::~WebhookServer() { Stop(); }

Status WebhookServer::Start(const std::string& host, int port) {
  std::lock_guard l(mu_);
  if (impl_) return Internal("webhook server already started");
  auto impl = std::make_unique<Impl>();
  boost::system::error_code ec;
  impl->tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  impl->tls.use_certificate_chain_file(options_.cert_file, ec);
  if (ec) return InvalidArgument("webhook certificate " + options_.cert_file + ": " + ec.message());
  impl->tls.use_private_key_file(options_.key_file, asio::ssl::context::pem, ec);
  if (ec) return InvalidArgument("webhook key " + options_.key_file + ": " + ec.message());
  auto address = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("webhook address \"" + host + "\": " + ec.message());
  tcp::endpoint ep(address, static_cast<uint16_t>(port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("webhook listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  port_ = impl->acceptor.local_endpoint().port();
  impl_ = std::move(impl);
  Impl* im = impl_.get();
  accept_thread_ = std::thread([this, im] {
    while (!stopping_) {
      boost::system::error_code aec;
      tcp::socket socket(im->io);
      im->acceptor.accept(socket, aec);
      if (stopping_) break;
      if (aec) continue;
      if (active_.load() >= options_.max_connections) continue;  // closed as `socket` goes
      ++active_;
      std::thread([this, im, s = std::move(socket)]() mutable {
        timeval tv{};
        tv.tv_sec = options_.request_timeout.count() / 1000;
        tv.tv_usec = (options_.request_timeout.count() % 1000) * 1000;
        ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        boost::system::error_code ec;
        asio::ssl::stream<tcp::socket&> stream(s, im->tls);
        stream.handshake(asio::ssl::stream_base::server, ec);
        if (!ec) {
          boost::beast::flat_buffer buffer;
          http::request_parser<http::string_body> parser;
          parser.body_limit(kMaxBody);
          http::read(stream, buffer, parser, ec);
          if (!ec) {
            const auto& req = parser.get();
            http::response<http::string_body> res;
            res.version(req.version());
            res.keep_alive(false);
            res.set(http::field::content_type, "application/json");
            if (req.method() != http::verb::post || req.target().substr(0, 12) != "/mutate-pods") {
              res.result(http::status::not_found);
              res.body() = "{\"error\":\"POST /mutate-pods only\"}";
            } else {
              Json review = Json::parse(req.body(), nullptr, false);
              Result<Json> answer =
                  review.is_discarded() ? Result<Json>(InvalidArgument("body is not JSON")) : handler_(review);
              if (answer.ok()) {
                res.result(http::status::ok);
                res.body() = answer->dump();
                ++served_;
              } else {
                res.result(http::status::bad_request);
                res.body() = Json{{"error", answer.error().message}}.dump();
                log::Warn("webhook request refused", {{"error", answer.error().message}});
              }
            }
            res.prepare_payload();
            http::write(stream, res, ec);
            if (!ec) stream.shutdown(ec);
          }
        }
        boost::system::error_code ignored;
        s.close(ignored);
        --active_;
      }).detach();
    }
  });
  return Status();
}

void WebhookServer::Stop() {
  std::lock_guard l(mu_);
  if (!impl_ || stopping_.exchange(true)) return;
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);  // wakes the blocked accept
  if (accept_thread_.joinable()) accept_thread_.join();
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  // Connections in flight end by their deadline.
  while (active_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace lockstep::op
