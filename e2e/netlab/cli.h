// netlab's command line: subcommands with --options and positionals, declared
// as a table (NetlabCommands) and parsed with CLI11: options anywhere,
// `--opt=v`, typed values and choices; main exits 2 on usage errors.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lockstep::netlab {

enum class ArgType { kString, kInt, kFloat, kFlag };

struct OptionSpec {
  std::string name;  // "--hosts"
  ArgType type = ArgType::kString;
  std::string default_value;  // as text; empty: none
  std::vector<std::string> choices;
  bool required = false;
  std::string help;
};

struct PositionalSpec {
  std::string name;
  std::vector<std::string> choices;
  std::string help;
};

struct CommandSpec {
  std::string name, help;
  std::vector<OptionSpec> options;
  std::vector<PositionalSpec> positionals;
  // Name of a trailing "everything else" argument (exec's command, loadgen's
  // arguments), what follows the positionals or a `--`; empty: none.
  std::string remainder, remainder_help;
};

// A parsed command line. Values are kept as text (already checked against
// their type and choices); flags are present only when given.
struct Args {
  std::string command;
  std::map<std::string, std::string> values;  // "hosts", "link", ... -> text
  std::vector<std::string> rest;               // the remainder, as given

  bool Has(const std::string& key) const { return values.count(key) != 0; }
  std::string Get(const std::string& key) const;  // "" when absent
  long long Int(const std::string& key) const;
  double Float(const std::string& key) const;
  bool Flag(const std::string& key) const { return Has(key); }
};

struct ParseOutcome {
  enum Kind { kOk, kHelp, kUsageError } kind = kOk;
  Args args;
  std::string text;  // kHelp: the help; kUsageError: "netlab CMD: error: ..." and a hint
};

// netlab's subcommands and its description (the top-level --help).
const std::vector<CommandSpec>& NetlabCommands();
const std::string& NetlabDescription();

// Parses argv without the program name.
ParseOutcome ParseCommandLine(const std::vector<std::string>& argv);

}  // namespace lockstep::netlab
