#include "operator_scale_nodes.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

namespace lockstep::bench {

kube::Json GpuNode(const std::string& name, int ip_index, int gpus) {
  using kube::Json;
  const std::string ip =
      "10.254." + std::to_string(ip_index / 250) + "." + std::to_string(ip_index % 250 + 1);
  const Json resources = {{"cpu", "96"},
                          {"memory", "1024Gi"},
                          {"pods", "110"},
                          {"ephemeral-storage", "2Ti"},
                          {"nvidia.com/gpu", std::to_string(gpus)}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"annotations", {{"kwok.x-k8s.io/node", "fake"}, {"node.alpha.kubernetes.io/ttl", "0"}}},
        {"labels",
         {{"type", "kwok"},
          {"kubernetes.io/hostname", name},
          {"kubernetes.io/os", "linux"},
          {"kubernetes.io/arch", "amd64"},
          {"nvidia.com/gpu.present", "true"},
          {"nvidia.com/gpu.count", std::to_string(gpus)}}}}},
      {"spec",
       {{"taints", Json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})}}},
      {"status",
       {{"capacity", resources},
        {"allocatable", resources},
        {"addresses",
         Json::array({{{"type", "InternalIP"}, {"address", ip}}, {{"type", "Hostname"}, {"address", name}}})}}},
  };
}

Result<int> ReserveNodeIps(const std::string& cluster_dir, int count) {
  const std::string lock_path = cluster_dir + "/state/node-ip.lock";
  const std::string next_path = cluster_dir + "/state/node-ip-next";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open " + lock_path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    return Internal("flock " + lock_path + ": " + std::strerror(errno));
  }
  int first = 0;
  std::ifstream(next_path) >> first;
  std::ofstream(next_path) << first + count << "\n";
  ::close(fd);  // releases the lock
  return first;
}

Status RunPaced(Clock& clock, int count, const PaceOptions& options, const std::atomic<bool>& stop,
                const std::function<Status(int)>& op) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::optional<Error> first_error;  // GUARDED_BY(mu)
  std::atomic<bool> failed{false};
  const MonoTime t0 = clock.Monotonic();
  const auto spacing = std::chrono::duration<double>(1.0 / options.per_second);

  auto worker = [&] {
    for (int i = next++; i < count && !stop && !failed; i = next++) {
      MonoTime due = t0 + std::chrono::duration_cast<Nanos>(spacing * i);
      Nanos wait = due - clock.Monotonic();
      if (wait > Nanos(0)) std::this_thread::sleep_for(wait);
      Status s = op(i);
      for (int attempt = 1; !s.ok() && s.code() == ErrorCode::kUnavailable && attempt < options.attempts; ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        s = op(i);
      }
      if (!s.ok()) {
        std::lock_guard l(mu);
        if (!first_error) first_error = s.error();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.threads); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (first_error) return *first_error;
  return Status::Ok();
}

}  // namespace lockstep::bench
