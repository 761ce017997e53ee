#include "lockstep/kube/curl_kube_api.h"

#include <curl/curl.h>

#include <mutex>

#include "file_util.h"
#include "http_status.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/paths.h"
#include "watch_decoder.h"

namespace lockstep::kube {

struct CurlKubeApi::Request {
  Verb verb;
  std::string resource;  // plural resource name (metrics label), e.g. "leases"
  const char* method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;    // path and query
  std::string body;    // sent when non-empty
  const char* content_type = nullptr;
  std::string what;    // for messages: `get v1 pods "ns/name"`
};

namespace {

constexpr long kPollMs = 50;          // Watch() notices `stop` within this
constexpr size_t kMaxErrorBody = 64 * 1024;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

long Millis(Nanos d) { return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); }

std::string What(const char* verb, const Gvr& r, const std::string& ns, const std::string& name) {
  std::string s = std::string(verb) + " " + r.ApiVersion() + " " + r.resource;
  if (!name.empty() || !ns.empty()) s += " \"" + ObjectKey(r.namespaced ? ns : "", name) + "\"";
  return s;
}

// The namespace to address: explicit `ns`, else the object's own.
std::string NsFor(const Gvr& r, const std::string& ns, const Json& obj) {
  if (!r.namespaced) return "";
  return ns.empty() ? Namespace(obj) : ns;
}

Status CheckReadable(const std::string& path, const char* what) {
  if (path.empty()) return Status::Ok();
  auto r = internal::ReadFile(path);
  if (!r) return InvalidArgument(std::string(what) + ": " + r.error().message);
  return Status::Ok();
}

// Per-watch state shared with the write callback.
struct WatchState {
  CURL* curl = nullptr;
  const WatchHandler* handler = nullptr;
  internal::WatchDecoder decoder;
  long http_status = 0;
  std::string error_body;
  std::optional<Error> error;  // ERROR event or malformed stream
  bool handler_stopped = false;
  std::vector<std::string> lines;

  // Delivers complete lines; false to abort the transfer.
  bool Deliver() {
    for (const std::string& line : lines) {
      auto ev = internal::ParseWatchEvent(line);
      if (!ev) { error = ev.error(); return false; }
      if (ev->type == "ERROR") { error = internal::WatchErrorEvent(*ev); return false; }
      if (!(*handler)(*ev)) { handler_stopped = true; return false; }
    }
    lines.clear();
    return true;
  }
};

size_t WatchWrite(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<WatchState*>(user);
  size_t len = size * n;
  if (st->http_status == 0) curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &st->http_status);
  if (st->http_status != 200) {
    if (st->error_body.size() < kMaxErrorBody) st->error_body.append(data, len);
    return len;
  }
  if (Status s = st->decoder.Feed(std::string_view(data, len), st->lines); !s) {
    st->error = s.error();
    return 0;
  }
  return st->Deliver() ? len : 0;
}

}  // namespace

Result<std::unique_ptr<CurlKubeApi>> CurlKubeApi::FromConfig(const KubeConfig& config, Clock& clock,
                                                             CurlKubeApiOptions options) {
  if (config.server.empty()) return InvalidArgument("kube config (" + config.source + "): no server");
  for (auto [path, what] : {std::pair{&config.ca_file, "certificate-authority"},
                            std::pair{&config.client_cert_file, "client-certificate"},
                            std::pair{&config.client_key_file, "client-key"}}) {
    if (Status s = CheckReadable(*path, what); !s) return s.error();
  }
  GlobalInit();
  return std::unique_ptr<CurlKubeApi>(new CurlKubeApi(config, clock, std::move(options)));
}

CurlKubeApi::CurlKubeApi(KubeConfig config, Clock& clock, CurlKubeApiOptions options)
    : config_(std::move(config)), clock_(clock), options_(std::move(options)) {
  if (!config_.token.empty()) {
    token_ = TokenSource::Static(config_.token);
  } else if (!config_.token_file.empty()) {
    token_ = TokenSource::FromFile(config_.token_file, clock_, options_.token_reread_interval);
  }
  if (options_.registry != nullptr) {
    requests_metric_ = &options_.registry->Counter("lockstep_kube_requests_total",
                                                   "Kubernetes API requests by verb, resource and HTTP code",
                                                   {"verb", "resource", "code"});
    duration_metric_ = &options_.registry->Histogram("lockstep_kube_request_duration_seconds",
                                                     "Kubernetes API request latency (watches excluded)", {"verb"},
                                                     metrics::DefaultSecondsBuckets());
  }
}

CurlKubeApi::~CurlKubeApi() {
  std::lock_guard l(pool_mu_);
  for (void* c : idle_) curl_easy_cleanup(static_cast<CURL*>(c));
}

uint64_t CurlKubeApi::RequestCount() const {
  uint64_t total = 0;
  for (const auto& c : counts_) total += c.load(std::memory_order_relaxed);
  return total;
}

void CurlKubeApi::Count(Verb v, const std::string& resource, const std::string& code, Nanos elapsed) {
  counts_[static_cast<size_t>(v)].fetch_add(1, std::memory_order_relaxed);
  if (requests_metric_ != nullptr) requests_metric_->Inc({VerbName(v), resource, code});
  if (duration_metric_ != nullptr && v != Verb::kWatch) {
    duration_metric_->Observe({VerbName(v)}, std::chrono::duration<double>(elapsed).count());
  }
}

void* CurlKubeApi::Borrow() {
  {
    std::lock_guard l(pool_mu_);
    if (!idle_.empty()) {
      void* c = idle_.back();
      idle_.pop_back();
      curl_easy_reset(static_cast<CURL*>(c));  // keeps live connections and caches
      return c;
    }
  }
  return curl_easy_init();
}

void CurlKubeApi::Return(void* c) {
  std::lock_guard l(pool_mu_);
  if (idle_.size() < options_.max_idle_handles) {
    idle_.push_back(c);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(c));
  }
}

Status CurlKubeApi::Configure(void* handle, const std::string& path, void** headers_out) {
  CURL* c = static_cast<CURL*>(handle);
  auto token = token_.Token();
  if (!token) return token.error();
  std::string url = config_.server + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());  // copied by curl
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, Millis(options_.connect_timeout));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (!config_.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
  } else if (!config_.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config_.client_cert_pem.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_cert_pem.data()), config_.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &blob);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_key_pem.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_key_pem.data()), config_.client_key_pem.size(),
                   CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &blob);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!config_.client_key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
  curl_slist* h = static_cast<curl_slist*>(*headers_out);
  h = curl_slist_append(h, "Accept: application/json");
  h = curl_slist_append(h, "Expect:");  // no 100-continue round trip for large bodies
  if (!token->empty()) h = curl_slist_append(h, ("Authorization: Bearer " + *token).c_str());
  *headers_out = h;
  return Status::Ok();
}

Result<CurlKubeApi::Response> CurlKubeApi::Perform(const Request& req) {
  MonoTime start = clock_.Monotonic();
  CURL* c = static_cast<CURL*>(Borrow());
  if (c == nullptr) {
    Count(req.verb, req.resource, "error", Nanos(0));
    return Internal(req.what + ": curl_easy_init failed");
  }
  void* headers = nullptr;
  if (Status s = Configure(c, req.path, &headers); !s) {
    curl_slist_free_all(static_cast<curl_slist*>(headers));
    Return(c);
    Count(req.verb, req.resource, "error", Nanos(0));
    return s.error();
  }
  curl_slist* h = static_cast<curl_slist*>(headers);
  if (req.content_type != nullptr) h = curl_slist_append(h, (std::string("Content-Type: ") + req.content_type).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method);
  if (!req.body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  }
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, Millis(options_.request_timeout));
  Response resp;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(h);
  Return(c);
  Nanos elapsed = clock_.Monotonic() - start;
  if (rc != CURLE_OK) {
    Count(req.verb, req.resource, "error", elapsed);
    return Unavailable(req.what + ": " + (errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc)));
  }
  Count(req.verb, req.resource, std::to_string(resp.status), elapsed);
  return resp;
}

Result<Json> CurlKubeApi::Do(const Request& req) {
  auto resp = Perform(req);
  if (!resp) return resp.error();
  if (resp->status < 200 || resp->status >= 300) return internal::MapHttpError(resp->status, resp->body, req.what);
  Json j = Json::parse(resp->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal(req.what + ": unparseable response body: " + resp->body.substr(0, 200));
  return j;
}

Result<Json> CurlKubeApi::Get(const Gvr& r, const std::string& ns, const std::string& name) {
  if (name.empty()) return InvalidArgument("get " + r.resource + ": empty name");
  return Do({Verb::kGet, r.resource, "GET", ResourcePath(r, ns, name), "", nullptr, What("get", r, ns, name)});
}

Result<Json> CurlKubeApi::List(const Gvr& r, const std::string& ns, const ListOptions& o) {
  QueryBuilder q;
  q.Add("labelSelector", o.label_selector).Add("fieldSelector", o.field_selector);
  q.Add("resourceVersion", o.resource_version).Add("continue", o.continue_token);
  if (o.limit > 0) q.Add("limit", o.limit);
  return Do({Verb::kList, r.resource, "GET", ResourcePath(r, ns) + q.ToString(), "", nullptr, What("list", r, ns, "")});
}

Result<Json> CurlKubeApi::Create(const Gvr& r, const std::string& ns, const Json& obj) {
  std::string n = NsFor(r, ns, obj);
  return Do({Verb::kCreate, r.resource, "POST", ResourcePath(r, n), DumpJson(obj), "application/json",
             What("create", r, n, Name(obj))});
}

Result<Json> CurlKubeApi::Update(const Gvr& r, const std::string& ns, const Json& obj, const std::string& sub) {
  std::string n = NsFor(r, ns, obj), name = Name(obj);
  if (name.empty()) return InvalidArgument("update " + r.resource + ": object has no metadata.name");
  return Do({Verb::kUpdate, r.resource, "PUT", ResourcePath(r, n, name, sub), DumpJson(obj), "application/json",
             What(sub.empty() ? "update" : "update status", r, n, name)});
}

Result<Json> CurlKubeApi::MergePatch(const Gvr& r, const std::string& ns, const std::string& name,
                                     const Json& patch, const std::string& sub) {
  if (name.empty()) return InvalidArgument("patch " + r.resource + ": empty name");
  return Do({Verb::kPatch, r.resource, "PATCH", ResourcePath(r, ns, name, sub), DumpJson(patch),
             "application/merge-patch+json", What("patch", r, ns, name)});
}

Result<Json> CurlKubeApi::Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                                const ApplyOptions& opts, const std::string& sub) {
  if (name.empty()) return InvalidArgument("apply " + r.resource + ": empty name");
  if (!obj.is_object()) return InvalidArgument("apply " + r.resource + " \"" + name + "\": body is not an object");
  Json body = obj;  // apply requires apiVersion, kind and metadata.name
  if (!body.contains("apiVersion")) body["apiVersion"] = r.ApiVersion();
  if (!body.contains("kind") && !r.kind.empty()) body["kind"] = r.kind;
  if (!body["metadata"].is_object()) body["metadata"] = Json::object();
  if (!body["metadata"].contains("name")) body["metadata"]["name"] = name;
  if (r.namespaced && !ns.empty() && !body["metadata"].contains("namespace")) body["metadata"]["namespace"] = ns;
  QueryBuilder q;
  q.Add("fieldManager", opts.field_manager);
  if (opts.force) q.Add("force", "true");
  // JSON is valid YAML, so the apply-patch+yaml content type accepts it.
  return Do({Verb::kApply, r.resource, "PATCH", ResourcePath(r, ns, name, sub) + q.ToString(), DumpJson(body),
             "application/apply-patch+yaml", What("apply", r, ns, name)});
}

Status CurlKubeApi::Delete(const Gvr& r, const std::string& ns, const std::string& name,
                           const std::string& uid_precondition, std::optional<int64_t> grace_period_seconds) {
  if (name.empty()) return InvalidArgument("delete " + r.resource + ": empty name");
  Json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
  if (!uid_precondition.empty()) opts["preconditions"] = {{"uid", uid_precondition}};
  if (grace_period_seconds) opts["gracePeriodSeconds"] = *grace_period_seconds;
  return Status::FromResult(Do({Verb::kDelete, r.resource, "DELETE", ResourcePath(r, ns, name), DumpJson(opts),
                                "application/json", What("delete", r, ns, name)}));
}

Status CurlKubeApi::Watch(const Gvr& r, const std::string& ns, const WatchOptions& o, const WatchHandler& handler,
                          const std::atomic<bool>& stop) {
  std::string what = What("watch", r, ns, "");
  QueryBuilder q;
  q.Add("watch", "1");
  if (o.allow_bookmarks) q.Add("allowWatchBookmarks", "true");
  q.Add("resourceVersion", o.resource_version);
  q.Add("labelSelector", o.label_selector).Add("fieldSelector", o.field_selector);
  if (o.timeout_seconds > 0) q.Add("timeoutSeconds", o.timeout_seconds);

  // A watch gets a fresh handle: aborting a stream leaves the connection unusable.
  CURL* c = curl_easy_init();
  CURLM* m = curl_multi_init();
  if (c == nullptr || m == nullptr) {
    if (c) curl_easy_cleanup(c);
    if (m) curl_multi_cleanup(m);
    Count(Verb::kWatch, r.resource, "error", Nanos(0));
    return Internal(what + ": curl init failed");
  }
  void* headers = nullptr;
  Status configured = Configure(c, ResourcePath(r, ns) + q.ToString(), &headers);
  WatchState st;
  st.curl = c;
  st.handler = &handler;
  char errbuf[CURL_ERROR_SIZE] = {0};
  bool stopped = false;
  CURLcode rc = CURLE_OK;
  if (configured) {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &WatchWrite);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    // Dead-connection guard: the server ends the stream after timeoutSeconds.
    if (o.timeout_seconds > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (o.timeout_seconds + 30) * 1000L);
    curl_multi_add_handle(m, c);
    int running = 1;
    while (running > 0) {
      if (stop.load()) { stopped = true; break; }
      if (curl_multi_perform(m, &running) != CURLM_OK) break;
      if (running == 0) break;
      curl_multi_poll(m, nullptr, 0, kPollMs, nullptr);
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(m, &queued)) {
      if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
    }
    if (st.http_status == 0) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st.http_status);
    curl_multi_remove_handle(m, c);
  }
  curl_slist_free_all(static_cast<curl_slist*>(headers));
  curl_multi_cleanup(m);
  curl_easy_cleanup(c);
  Count(Verb::kWatch, r.resource, st.http_status ? std::to_string(st.http_status) : "error", Nanos(0));

  if (!configured) return configured;
  if (stopped || st.handler_stopped) return Status::Ok();
  if (st.error) return Error{st.error->code, what + ": " + st.error->message};
  if (st.http_status != 0 && st.http_status != 200) return internal::MapHttpError(st.http_status, st.error_body, what);
  if (rc != CURLE_OK && !(rc == CURLE_OPERATION_TIMEDOUT && st.http_status == 200)) {
    return Unavailable(what + ": " + (errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc)));
  }
  std::string last;
  if (st.decoder.Finish(last)) {
    st.lines.push_back(std::move(last));
    st.Deliver();
    if (st.error) return Error{st.error->code, what + ": " + st.error->message};
  }
  return Status::Ok();
}

}  // namespace lockstep::kube
