// CurlKubeApi against a local HTTP server (127.0.0.1, port 0) serving canned
// API responses and watch streams.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "lockstep/common/http_server.h"
#include "lockstep/kube/curl_kube_api.h"

namespace lockstep::kube {
namespace {

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

HttpResponse JsonResponse(int status, const std::string& body) { return {status, "application/json", body}; }

// A fake API server recording requests.
struct ApiServer {
  HttpServer server;
  std::mutex mu;
  std::vector<HttpRequest> requests;

  void Handle(const std::string& path, std::function<HttpResponse(const HttpRequest&)> fn) {
    server.Handle(path, [this, fn](const HttpRequest& r) {
      {
        std::lock_guard l(mu);
        requests.push_back(r);
      }
      return fn(r);
    });
  }
  HttpRequest Last() {
    std::lock_guard l(mu);
    return requests.back();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(server.port()); }
};

std::unique_ptr<CurlKubeApi> Connect(const std::string& url, metrics::Registry* reg = nullptr) {
  KubeConfig cfg;
  cfg.server = url;
  cfg.token = "secret-token";
  CurlKubeApiOptions opts;
  opts.registry = reg;
  opts.request_timeout = std::chrono::seconds(5);
  auto api = CurlKubeApi::FromConfig(cfg, SystemClock::Instance(), opts);
  REQUIRE(api.ok());
  return std::move(*api);
}

TEST_CASE("curl api: verbs, paths, bodies and status mapping", "[kube][curl]") {
  ApiServer s;
  const std::string pods = "/api/v1/namespaces/ns/pods";
  s.Handle(pods + "/p", [](const HttpRequest& r) {
    if (r.method == "GET") return JsonResponse(200, R"({"kind":"Pod","metadata":{"name":"p"}})");
    if (r.method == "PUT") return JsonResponse(409, StatusBody(409, "Conflict", "the object has been modified"));
    if (r.method == "PATCH") return JsonResponse(200, r.body);
    if (r.method == "DELETE") return JsonResponse(200, StatusBody(200, "", ""));
    return JsonResponse(405, "");
  });
  s.Handle(pods, [](const HttpRequest& r) {
    if (r.method == "POST") return JsonResponse(409, StatusBody(409, "AlreadyExists", "pods \"p\" already exists"));
    return JsonResponse(200, R"({"kind":"PodList","metadata":{"resourceVersion":"42","continue":"c2"},"items":[]})");
  });
  s.Handle(pods + "/missing", [](const HttpRequest&) {
    return JsonResponse(404, StatusBody(404, "NotFound", "pods \"missing\" not found"));
  });
  s.Handle(pods + "/gone", [](const HttpRequest&) { return JsonResponse(410, StatusBody(410, "Gone", "gone")); });
  s.Handle(pods + "/denied", [](const HttpRequest&) { return JsonResponse(403, StatusBody(403, "Forbidden", "no")); });
  s.Handle(pods + "/garbage", [](const HttpRequest&) { return JsonResponse(200, "{not json"); });
  s.Handle(pods + "/busy", [](const HttpRequest&) { return JsonResponse(503, "overloaded"); });
  s.Handle("/apis/lockstep.dev/v1alpha1/fabricpolicies/default", [](const HttpRequest& r) {
    if (r.body.find("\"replicas\"") != std::string::npos) {
      return JsonResponse(422, StatusBody(422, "Invalid", "spec.probe.intervalMs: Invalid value: 0"));
    }
    return JsonResponse(200, r.body);
  });
  REQUIRE(s.server.Start("127.0.0.1", 0).ok());
  metrics::Registry reg;
  auto api = Connect(s.Url(), &reg);

  auto got = api->Get(gvr::kPods, "ns", "p");
  REQUIRE(got.ok());
  CHECK((*got)["metadata"]["name"] == "p");

  auto list = api->List(gvr::kPods, "ns", {.label_selector = "app=x", .limit = 10, .continue_token = "c1"});
  REQUIRE(list.ok());
  CHECK((*list)["metadata"]["continue"] == "c2");
  CHECK(s.Last().query == "labelSelector=app%3Dx&continue=c1&limit=10");

  auto missing = api->Get(gvr::kPods, "ns", "missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.error().message, Catch::Contains("pods \"missing\" not found"));

  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
  CHECK(api->Create(gvr::kPods, "", pod).code() == ErrorCode::kAlreadyExists);
  CHECK(s.Last().method == "POST");
  CHECK(api->Update(gvr::kPods, "ns", pod).code() == ErrorCode::kConflict);
  CHECK(s.Last().method == "PUT");
  CHECK(api->Get(gvr::kPods, "ns", "gone").code() == ErrorCode::kGone);
  CHECK(api->Get(gvr::kPods, "ns", "denied").code() == ErrorCode::kUnauthorized);
  CHECK(api->Get(gvr::kPods, "ns", "garbage").code() == ErrorCode::kInternal);
  auto busy = api->Get(gvr::kPods, "ns", "busy");
  CHECK(busy.code() == ErrorCode::kUnavailable);
  CHECK_THAT(busy.error().message, Catch::Contains("overloaded"));

  auto patched = api->MergePatch(gvr::kPods, "ns", "p", {{"metadata", {{"labels", {{"a", "b"}}}}}});
  REQUIRE(patched.ok());
  CHECK((*patched)["metadata"]["labels"]["a"] == "b");
  CHECK(s.Last().method == "PATCH");

  Json spec = {{"spec", {{"probe", {{"intervalMs", 100}}}}}};
  auto applied = api->Apply(gvr::kFabricPolicies, "", "default", spec, {.field_manager = "lockstep-operator"});
  REQUIRE(applied.ok());
  CHECK((*applied)["apiVersion"] == "lockstep.dev/v1alpha1");  // filled in for apply
  CHECK((*applied)["kind"] == "FabricPolicy");
  CHECK((*applied)["metadata"]["name"] == "default");
  CHECK(s.Last().query == "fieldManager=lockstep-operator&force=true");
  auto invalid = api->Apply(gvr::kFabricPolicies, "", "default", {{"spec", {{"replicas", 0}}}}, {});
  REQUIRE_FALSE(invalid.ok());
  CHECK(invalid.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(invalid.error().message, Catch::Contains("spec.probe.intervalMs: Invalid value: 0"));

  REQUIRE(api->Delete(gvr::kPods, "ns", "p", "uid-1").ok());
  CHECK(Json::parse(s.Last().body)["preconditions"]["uid"] == "uid-1");
  CHECK_FALSE(Json::parse(s.Last().body).contains("gracePeriodSeconds"));  // the object's default
  REQUIRE(api->Delete(gvr::kPods, "ns", "p", "uid-2", 0).ok());
  CHECK(Json::parse(s.Last().body)["gracePeriodSeconds"] == 0);
  CHECK(Json::parse(s.Last().body)["preconditions"]["uid"] == "uid-2");
  CHECK(api->Delete(gvr::kPods, "ns", "missing").code() == ErrorCode::kNotFound);

  CHECK(api->RequestCount(Verb::kGet) == 6);
  CHECK(api->RequestCount(Verb::kApply) == 2);
  CHECK(api->RequestCount() == 15);
  auto& requests = reg.Counter("lockstep_kube_requests_total", "", {"verb", "resource", "code"});
  CHECK(requests.Get({"get", "pods", "200"}) == 2);
  CHECK(requests.Get({"get", "pods", "404"}) == 1);
  CHECK(requests.Get({"apply", "fabricpolicies", "200"}) == 1);
  s.server.Stop();
}

TEST_CASE("curl api: connection errors are Unavailable", "[kube][curl]") {
  int port;
  {
    HttpServer probe;
    REQUIRE(probe.Start("127.0.0.1", 0).ok());
    port = probe.port();
  }  // closed: nothing listens there now
  auto api = Connect("http://127.0.0.1:" + std::to_string(port));
  auto r = api->Get(gvr::kPods, "ns", "p");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == ErrorCode::kUnavailable);
  std::atomic<bool> stop{false};
  CHECK(api->Watch(gvr::kPods, "ns", {}, [](const WatchEvent&) { return true; }, stop).code() ==
        ErrorCode::kUnavailable);
}

TEST_CASE("curl api: bad config is rejected up front", "[kube][curl]") {
  KubeConfig cfg;
  CHECK(CurlKubeApi::FromConfig(cfg, SystemClock::Instance()).code() == ErrorCode::kInvalidArgument);
  cfg.server = "https://127.0.0.1:1";
  cfg.ca_file = "/nonexistent/ca.crt";
  CHECK(CurlKubeApi::FromConfig(cfg, SystemClock::Instance()).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("curl api: watch streams events and maps a 410 ERROR event to Gone", "[kube][curl]") {
  ApiServer s;
  s.Handle("/api/v1/namespaces/ns/pods", [](const HttpRequest&) {
    std::string body =
        R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})" "\n"
        R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})" "\n"
        R"J({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"}})J" "\n"
        R"({"type":"ADDED","object":{"metadata":{"name":"never"}}})" "\n";
    return JsonResponse(200, body);
  });
  s.Handle("/api/v1/namespaces/other/pods", [](const HttpRequest&) {
    // Ends without a trailing newline: the last event must still arrive.
    return JsonResponse(200, R"({"type":"DELETED","object":{"metadata":{"name":"z"}}})");
  });
  s.Handle("/api/v1/namespaces/expired/pods", [](const HttpRequest&) {
    return JsonResponse(410, StatusBody(410, "Expired", "too old resource version"));
  });
  REQUIRE(s.server.Start("127.0.0.1", 0).ok());
  auto api = Connect(s.Url());
  std::atomic<bool> stop{false};
  std::vector<WatchEvent> events;
  auto collect = [&](const WatchEvent& ev) {
    events.push_back(ev);
    return true;
  };
  WatchOptions opts;
  opts.resource_version = "3";
  opts.timeout_seconds = 60;
  Status st = api->Watch(gvr::kPods, "ns", opts, collect, stop);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == ErrorCode::kGone);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == "ADDED");
  CHECK(events[1].type == "BOOKMARK");
  CHECK(s.Last().query == "watch=1&allowWatchBookmarks=true&resourceVersion=3&timeoutSeconds=60");

  events.clear();
  CHECK(api->Watch(gvr::kPods, "other", {}, collect, stop).ok());
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == "DELETED");

  CHECK(api->Watch(gvr::kPods, "expired", {}, collect, stop).code() == ErrorCode::kGone);

  // The handler can end the watch.
  events.clear();
  CHECK(api->Watch(gvr::kPods, "ns", {}, [&](const WatchEvent& ev) {
          events.push_back(ev);
          return false;
        }, stop).ok());
  CHECK(events.size() == 1);
  CHECK(api->RequestCount(Verb::kWatch) == 4);
  s.server.Stop();
}

TEST_CASE("curl api: watch returns promptly when stop is set", "[kube][curl]") {
  std::mutex mu;
  std::condition_variable cv;
  bool arrived = false, release = false;
  HttpServer server;
  server.Handle("/api/v1/pods", [&](const HttpRequest&) {
    std::unique_lock l(mu);
    arrived = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });  // holds the stream open
    return JsonResponse(200, "");
  });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  auto api = Connect("http://127.0.0.1:" + std::to_string(server.port()));
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    CHECK(api->Watch(gvr::kPods, "", {}, [](const WatchEvent&) { return true; }, stop).ok());
    done = true;
  });
  {
    std::unique_lock l(mu);
    REQUIRE(cv.wait_for(l, std::chrono::seconds(5), [&] { return arrived; }));
  }
  auto stop_at = std::chrono::steady_clock::now();
  stop = true;
  watcher.join();
  auto took = std::chrono::steady_clock::now() - stop_at;
  CHECK(done);
  CHECK(took < std::chrono::milliseconds(500));
  {
    std::lock_guard l(mu);
    release = true;
  }
  cv.notify_all();
  server.Stop();
}

}  // namespace
}  // namespace lockstep::kube
