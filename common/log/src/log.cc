#include "lockstep/common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

#include "lockstep/common/pi_mutex.h"

namespace lockstep::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
// Priority-inheriting: the fabric prober (SCHED_FIFO) logs transitions.
// A function-local static: safe to log from other static initialisers.
PiMutex& Mu() {
  static PiMutex mu;
  return mu;
}
std::string g_component;  // GUARDED_BY(Mu())

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}
}  // namespace

void SetLevel(Level level) { g_level = static_cast<int>(level); }

void SetComponent(std::string component) {
  std::lock_guard lock(Mu());
  g_component = std::move(component);
}

namespace {
template <typename Fields>
void WriteLine(Level level, std::string_view msg, const Fields& fields) {
  if (static_cast<int>(level) < g_level.load()) return;
  using namespace std::chrono;
  double ts = duration<double>(system_clock::now().time_since_epoch()).count();
  nlohmann::json line;
  line["ts"] = ts;
  line["level"] = LevelName(level);
  line["msg"] = std::string(msg);
  std::lock_guard lock(Mu());
  if (!g_component.empty()) line["component"] = g_component;
  for (const auto& [k, v] : fields) line[std::string(k)] = v;
  std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fprintf(stderr, "%s\n", out.c_str());
}
}  // namespace

void Write(Level level, std::string_view msg, std::initializer_list<Field> fields) { WriteLine(level, msg, fields); }
void Write(Level level, std::string_view msg, const std::vector<Field>& fields) { WriteLine(level, msg, fields); }

}  // namespace lockstep::log
