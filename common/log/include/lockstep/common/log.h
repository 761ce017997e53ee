// Structured logging: one JSON object per line on stderr
// ({"ts":...,"level":"info","msg":...,<fields>}). Thread-safe.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using Field = std::pair<std::string_view, std::string>;

void SetLevel(Level level);
// Sets the name every line carries as "component" (e.g. "operator").
void SetComponent(std::string component);
void Write(Level level, std::string_view msg, std::initializer_list<Field> fields = {});
// The same with fields known only at run time.
void Write(Level level, std::string_view msg, const std::vector<Field>& fields);

inline void Debug(std::string_view m, std::initializer_list<Field> f = {}) { Write(Level::kDebug, m, f); }
inline void Info(std::string_view m, std::initializer_list<Field> f = {}) { Write(Level::kInfo, m, f); }
inline void Warn(std::string_view m, std::initializer_list<Field> f = {}) { Write(Level::kWarn, m, f); }
inline void Error(std::string_view m, std::initializer_list<Field> f = {}) { Write(Level::kError, m, f); }

}  // namespace lockstep::log
