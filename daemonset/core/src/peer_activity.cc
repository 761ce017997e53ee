#include "lockstep/agent/peer_activity.h"

namespace lockstep::agent {

void PeerActivity::Update(MonoTime now, const std::vector<TcpFlow>& flows) {
  std::map<uint64_t, uint64_t> seen;
  for (const TcpFlow& f : flows) {
    auto it = bytes_.find(f.cookie);
    const bool moved = it == bytes_.end() ? f.bytes > 0 : f.bytes != it->second;
    if (moved) moved_[f.remote] = now;
    seen[f.cookie] = f.bytes;
  }
  bytes_ = std::move(seen);  // closed connections drop out
  std::erase_if(moved_, [&](const auto& e) { return now - e.second > hold_; });
}

bool PeerActivity::Active(uint32_t remote, MonoTime now) const {
  auto it = moved_.find(remote);
  return it != moved_.end() && now - it->second <= hold_;
}

}  // namespace lockstep::agent
