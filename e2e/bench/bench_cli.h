// Command-line helpers shared by the benchmark binaries (CLI11): a validator
// for values that must be above 0, and parsing that exits 0 after --help and
// 2 on bad usage (CLI11's own codes are 100+), as the hand-written parsers did.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace lockstep::bench {

// A number above 0. (CLI::PositiveNumber's message prints its upper bound,
// DBL_MAX, in full.)
inline CLI::Validator Positive() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(d > 0)) return "must be above 0 (got " + v + ")";
        return "";
      },
      "POSITIVE");
}

// Parses argv; nullopt to go on, else the exit code (help printed: 0; a usage
// error, printed with a hint: 2).
inline std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace lockstep::bench
