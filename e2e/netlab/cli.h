// netlab's command line: subcommands with --options and positionals, parsed
// the way the original argparse front end did (options anywhere, `--opt=v`,
// unique prefixes, typed values and choices; exit code 2 on usage errors).
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
};

struct CommandSpec {
  std::string name, help;
  std::vector<OptionSpec> options;
  std::vector<PositionalSpec> positionals;
  // Name of a trailing "everything else" argument (exec's command, loadgen's
  // arguments); empty: none.
  std::string remainder;
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
  std::string text;  // kHelp: the help; kUsageError: usage and error lines
};

// netlab's subcommands and its description (the top-level --help).
const std::vector<CommandSpec>& NetlabCommands();
const std::string& NetlabDescription();

// Parses argv without the program name.
ParseOutcome ParseCommandLine(const std::vector<std::string>& argv);

}  // namespace lockstep::netlab
