// A simulated member of a training job for the migration-k8s-scale benchmark:
// a thread that speaks the coordinator's HTTP API (docs/migration.md, "HTTP
// API") the way python/lockstep_train does, without training anything. Ranks
// and spares run on kwok pods, where no process runs, so the benchmark plays
// their processes:
//   - register with its pod's name and uid (rank r, or a spare);
//   - a spare (and a rank between generations) long-polls GET /v1/plan
//     (wait_ms 1000, as the library does) until it is told to train;
//   - a training rank heartbeats every `heartbeat_interval` (the library's
//     0.75 s), its step advancing at `steps_per_s`; directive `abort` -> it
//     reports its committed step (reason error); `pause` -> it reports at the
//     pause step once it reached it (reason pause); `exit` -> it ends;
//   - PeerError(): a peer's process died (its pod deleted), which a real rank
//     learns at once from its failed collective: it reports (reason error);
//   - Kill(): its own process is gone (its pod was deleted): no more calls.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace lockstep::bench {

struct MemberOptions {
  std::string id{};   // member id (the pod's name)
  int rank = -1;      // -1: a spare
  std::string pod{};  // pod_name / pod_uid sent in register
  std::string uid{};
  std::string host{};  // "10.x.y.z": only reported in plans
  // The coordinator's base URL, once known ("" while it starts: the member waits).
  std::function<std::string()> url{};
  double heartbeat_interval_s = 0.75;
  double steps_per_s = 10;
};

class SimMember {
 public:
  explicit SimMember(MemberOptions options);
  ~SimMember();  // Stop()s
  SimMember(const SimMember&) = delete;
  SimMember& operator=(const SimMember&) = delete;

  void Start();
  void Stop();       // ends the thread (the benchmark is done)
  void Kill();       // its pod is gone: it makes no more calls
  void PeerError();  // a peer died: report now if training

  const std::string& id() const { return options_.id; }
  const std::string& pod() const { return options_.pod; }
  int rank() const { return rank_.load(); }  // the rank it holds now (-1: none)
  bool registered() const { return registered_.load(); }
  bool ended() const { return ended_.load(); }  // told to exit, killed or stopped
  long calls() const { return calls_.load(); }
  long failed_calls() const { return failed_calls_.load(); }

 private:
  void Run();
  // Sleeps up to `seconds`, returning early on Stop/Kill/PeerError.
  void Nap(double seconds);
  bool Done() const { return stop_.load() || killed_.load(); }

  const MemberOptions options_;
  std::atomic<int> rank_{-1};
  std::atomic<bool> stop_{false}, killed_{false}, peer_error_{false}, registered_{false}, ended_{false};
  std::atomic<long> calls_{0}, failed_calls_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace lockstep::bench
