// Store: the informer's cache of one resource type, keyed by "ns/name" (see
// ObjectKey). Consumers get `const Store&` and read; only the Informer writes.
// Objects are immutable shared snapshots: a pointer returned by Get stays valid
// and unchanged after the store moves on. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/kube/kube_api.h"

namespace lockstep::kube {

using ObjectPtr = std::shared_ptr<const Json>;

class Store {
 public:
  using Predicate = std::function<bool(const Json&)>;

  // nullptr when absent. For cluster-scoped objects pass ns = "".
  ObjectPtr Get(const std::string& ns, const std::string& name) const;
  ObjectPtr GetByKey(const std::string& key) const;
  // All objects (sorted by key), or those matching `pred`. REQUIRES: pred does
  // not call back into this store (it runs under the lock).
  std::vector<ObjectPtr> List() const;
  std::vector<ObjectPtr> List(const Predicate& pred) const;
  std::vector<std::string> Keys() const;
  size_t Size() const;

  // --- Writers (the Informer) ---
  // Inserts or replaces; returns the previous object (nullptr if new).
  ObjectPtr Upsert(const std::string& key, ObjectPtr obj);
  // Removes; returns the removed object (nullptr if absent).
  ObjectPtr Erase(const std::string& key);
  // Swaps in a full listing; returns the previous contents.
  std::map<std::string, ObjectPtr> Replace(std::map<std::string, ObjectPtr> objects);

 private:
  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr> objects_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::kube
