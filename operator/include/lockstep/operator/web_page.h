// WebPage: the operator's built-in, read-only web page (issue 26 §4). It
// serves, GET only (any other method: 405):
//
//   /           the page (HTML; web/index.html, embedded in the binary)
//   /web.js     its script (builds the DOM from /api/view with textContent
//               only: no markup from the cluster is ever parsed)
//   /web.css    its style sheet
//   /api/view   the view model (web_view.h) as JSON, from the informers'
//               stores at the time of the request
//   /api/nodeaudit?name=<audit>.<node>
//               one NodeAudit with every check (the audit tree's drill-down)
//
// Nothing is fetched from elsewhere (the page's Content-Security-Policy
// allows only its own origin). The page reads the operator's caches, never
// the API server, and no Secret: every replica serves it, leader or not.
// Watch() records rail transitions and migrations seen while running (the
// flap timeline and the migration history beyond each object's latest), in
// memory, bounded.
//
// Thread-safe: Watch() before the informers start; Handle() from any thread.
#pragma once

#include <deque>
#include <mutex>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/http_server.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/store.h"
#include "lockstep/operator/web_view.h"

namespace lockstep::op {

struct WebPageSources {
  const kube::Store* healths = nullptr;
  const kube::Store* policies = nullptr;
  const kube::Store* training_jobs = nullptr;
  const kube::Store* job_pods = nullptr;
  const kube::Store* fleet_audits = nullptr;
  const kube::Store* node_audits = nullptr;
};

struct WebPageOptions {
  size_t max_recorded_flaps = 1000;
  size_t max_recorded_migrations = 1000;
};

class WebPage {
 public:
  // REQUIRES: every store in `sources` is set and, with `clock`, outlives this.
  WebPage(WebPageSources sources, const Clock& clock, WebPageOptions options = {});

  // Records rail transitions (from FabricHealth updates) and migrations (from
  // TrainingJob updates). REQUIRES: before the informers start.
  void Watch(kube::Informer& healths, kube::Informer& training_jobs);

  // Registers the paths above. REQUIRES: before server.Start().
  void Register(HttpServer& server);

  HttpResponse Handle(const HttpRequest& request) const;
  kube::Json View() const;

 private:
  void Record(const std::vector<RailTransition>& flaps);
  void Record(const std::vector<MigrationEvent>& migrations);

  const WebPageSources sources_;
  const Clock& clock_;
  const WebPageOptions options_;
  mutable std::mutex mu_;
  std::deque<RailTransition> flaps_;       // GUARDED_BY(mu_), oldest first
  std::deque<MigrationEvent> migrations_;  // GUARDED_BY(mu_), oldest first
};

}  // namespace lockstep::op
