// FakeNvmlState: drives the fake NVML library (fake_nvml.cc) from a test. It
// owns a temporary state file, points $FAKE_NVML_STATE at it, and rewrites
// it on every Set, so the next NVML call sees the change:
//
//   FakeNvmlState nvml;               // one healthy GPU
//   nvml.Set("gpus", "2");
//   nvml.Set("gpu.1.temp", "93");     // raise a temperature
//   nvml.Set("xid.1", "1:79");        // inject Xid 79 on GPU 1
//
// Not thread-safe; one per test (it owns the process's $FAKE_NVML_STATE).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace lockstep::testing {

class FakeNvmlState {
 public:
  FakeNvmlState() {
    char path[] = "/tmp/fake-nvml-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    path_ = path;
    Write();
    setenv("FAKE_NVML_STATE", path_.c_str(), 1);
  }
  ~FakeNvmlState() {
    unsetenv("FAKE_NVML_STATE");
    std::remove(path_.c_str());
  }
  FakeNvmlState(const FakeNvmlState&) = delete;
  FakeNvmlState& operator=(const FakeNvmlState&) = delete;

  void Set(const std::string& key, const std::string& value) {
    values_[key] = value;
    Write();
  }
  void Erase(const std::string& key) {
    values_.erase(key);
    Write();
  }
  // The driver goes away: the state file disappears (nvmlInit_v2 fails).
  void RemoveFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  void Write() const {
    std::ofstream out(path_, std::ios::trunc);
    for (const auto& [k, v] : values_) out << k << '=' << v << '\n';
  }
  std::string path_;
  std::map<std::string, std::string> values_;
};

}  // namespace lockstep::testing
