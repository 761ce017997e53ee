#include "lockstep/kube/store.h"

#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {

ObjectPtr Store::Get(const std::string& ns, const std::string& name) const { return GetByKey(ObjectKey(ns, name)); }

ObjectPtr Store::GetByKey(const std::string& key) const {
  std::lock_guard l(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::List() const {
  std::lock_guard l(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [k, o] : objects_) out.push_back(o);
  return out;
}

std::vector<ObjectPtr> Store::List(const Predicate& pred) const {
  std::lock_guard l(mu_);
  std::vector<ObjectPtr> out;
  for (const auto& [k, o] : objects_) {
    if (pred(*o)) out.push_back(o);
  }
  return out;
}

std::vector<std::string> Store::Keys() const {
  std::lock_guard l(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [k, o] : objects_) out.push_back(k);
  return out;
}

size_t Store::Size() const {
  std::lock_guard l(mu_);
  return objects_.size();
}

ObjectPtr Store::Upsert(const std::string& key, ObjectPtr obj) {
  std::lock_guard l(mu_);
  ObjectPtr& slot = objects_[key];
  ObjectPtr old = std::move(slot);
  slot = std::move(obj);
  return old;
}

ObjectPtr Store::Erase(const std::string& key) {
  std::lock_guard l(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  objects_.erase(it);
  return old;
}

std::map<std::string, ObjectPtr> Store::Replace(std::map<std::string, ObjectPtr> objects) {
  std::lock_guard l(mu_);
  objects_.swap(objects);
  return objects;
}

}  // namespace lockstep::kube
