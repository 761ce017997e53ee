#include "lockstep/operator/web_page.h"

#include "lockstep/kube/object_meta.h"
#include "web_assets.h"

namespace lockstep::op {
namespace {

std::vector<const kube::Json*> Objects(const kube::Store& store, std::vector<kube::ObjectPtr>& keep) {
  std::vector<kube::ObjectPtr> list = store.List();
  std::vector<const kube::Json*> out;
  out.reserve(list.size());
  for (const kube::ObjectPtr& o : list) out.push_back(o.get());
  keep.insert(keep.end(), list.begin(), list.end());
  return out;
}

}  // namespace

WebPage::WebPage(WebPageSources sources, const Clock& clock, WebPageOptions options)
    : sources_(sources), clock_(clock), options_(options) {}

void WebPage::Watch(kube::Informer& healths, kube::Informer& training_jobs) {
  healths.AddEventHandlers({.on_update = [this](const kube::ObjectPtr& before, const kube::ObjectPtr& after) {
    Record(RailTransitions(before.get(), *after));
  }});
  training_jobs.AddEventHandlers({
      .on_add = [this](const kube::ObjectPtr& obj) { Record(MigrationChanges(nullptr, *obj)); },
      .on_update = [this](const kube::ObjectPtr& before,
                          const kube::ObjectPtr& after) { Record(MigrationChanges(before.get(), *after)); },
  });
}

void WebPage::Record(const std::vector<RailTransition>& flaps) {
  if (flaps.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const RailTransition& t : flaps) flaps_.push_back(t);
  while (flaps_.size() > options_.max_recorded_flaps) flaps_.pop_front();
}

void WebPage::Record(const std::vector<MigrationEvent>& migrations) {
  if (migrations.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const MigrationEvent& m : migrations) migrations_.push_back(m);
  while (migrations_.size() > options_.max_recorded_migrations) migrations_.pop_front();
}

kube::Json WebPage::View() const {
  std::vector<kube::ObjectPtr> keep;  // holds the snapshots while the view is built
  WebViewInputs in;
  in.healths = Objects(*sources_.healths, keep);
  in.policies = Objects(*sources_.policies, keep);
  in.training_jobs = Objects(*sources_.training_jobs, keep);
  in.job_pods = Objects(*sources_.job_pods, keep);
  in.fleet_audits = Objects(*sources_.fleet_audits, keep);
  in.node_audits = Objects(*sources_.node_audits, keep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    in.recorded_flaps.assign(flaps_.begin(), flaps_.end());
    in.recorded_migrations.assign(migrations_.begin(), migrations_.end());
  }
  in.now = clock_.Wall();
  return BuildWebView(in);
}

HttpResponse WebPage::Handle(const HttpRequest& request) const {
  if (request.method != "GET") return {405, "text/plain; charset=utf-8", "method not allowed: the page is read-only\n"};
  if (request.path == "/" || request.path == "/index.html") {
    return {200, "text/html; charset=utf-8", std::string(web::kIndexHtml)};
  }
  if (request.path == "/web.js") return {200, "text/javascript; charset=utf-8", std::string(web::kWebJs)};
  if (request.path == "/web.css") return {200, "text/css; charset=utf-8", std::string(web::kWebCss)};
  if (request.path == "/api/view") return {200, "application/json", kube::DumpJson(View())};
  if (request.path == "/api/nodeaudit") {
    // ?name=<audit>.<node>: a DNS subdomain, so nothing to decode.
    const std::string prefix = "name=";
    std::string name = request.query.compare(0, prefix.size(), prefix) == 0 ? request.query.substr(prefix.size()) : "";
    if (name.empty() || name.size() > 253 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
      return {400, "text/plain; charset=utf-8", "want ?name=<NodeAudit name>\n"};
    }
    kube::ObjectPtr na = sources_.node_audits->Get("", name);
    if (!na) return {404, "text/plain; charset=utf-8", "no NodeAudit " + name + "\n"};
    return {200, "application/json", kube::DumpJson(NodeAuditView(*na))};
  }
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

void WebPage::Register(HttpServer& server) {
  for (const char* path : {"/", "/index.html", "/web.js", "/web.css", "/api/view", "/api/nodeaudit"}) {
    server.Handle(path, [this](const HttpRequest& r) { return Handle(r); });
  }
}

}  // namespace lockstep::op
