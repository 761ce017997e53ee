#include "netlab/cli.h"

#include <algorithm>
#include <cctype>

#include <CLI/CLI.hpp>

#include "netlab/parse.h"

namespace lockstep::netlab {
namespace {

const OptionSpec kName{"--name", ArgType::kString, "", {}, true, "the lab (at most 10 characters a-z0-9)"};

std::vector<CommandSpec> BuildCommands() {
  using T = ArgType;
  return {
      {"up", "build a lab",
       {kName,
        {"--hosts", T::kInt, "8", {}, false, "hosts (namespaces NAME-h0...)"},
        {"--rails", T::kInt, "2", {}, false, "rails (NICs) per host"},
        {"--leaves", T::kInt, "2", {}, false, ""},
        {"--spines", T::kInt, "2", {}, false, ""},
        {"--layout", T::kString, "striped", {"striped", "rail"}, false,
         "rail r of host h goes to leaf (h + r) % leaves (striped) or rail-optimized groups (rail)"},
        {"--hash-policy", T::kInt, "3", {"1", "3"}, false,
         "net.ipv4.fib_multipath_hash_policy on routers (3 = 5-tuple fields, see README)"},
        {"--hash-seed", T::kInt, "1", {}, false, "net.ipv4.fib_multipath_hash_seed on routers (0 = kernel's random seed)"},
        {"--subnet", T::kString, "", {}, false, "a private /16 (default 10.<77+index>.0.0/16)"},
        {"--link-rate", T::kString, "", {}, false, "tbf-shape both directions of every host link, e.g. 200mbit"},
        {"--miswire", T::kString, "", {}, false, "cable a host link to another leaf, e.g. h2r0:l1 (a cabling mistake)"},
        {"--napi-threads", T::kFlag, "", {}, false,
         "forward in napi kernel threads (SCHED_FIFO 1), not in the senders' softirq"},
        {"--replace", T::kFlag, "", {}, false, "tear down an existing lab of that name first"}},
       {},
       "", ""},
      {"down", "delete a lab (idempotent)", {kName}, {}, "", ""},
      {"link", "flap a link, or all links of a node",
       {kName,
        {"--silent", T::kFlag, "", {}, false, "blackhole without carrier loss or route change"},
        {"--one-way", T::kString, "", {"", "up", "down"}, false,
         "with --silent: drop only one direction (up: what the lower end sends, down: the upper end)"},
        {"--delay-ms", T::kFloat, "0", {}, false, "wait this long before rerouting"},
        {"--count", T::kInt, "10", {}, false, "flap: down/up cycles"},
        {"--period-ms", T::kFloat, "1000", {}, false, "flap: from one down to the next"},
        {"--down-ms", T::kFloat, "", {}, false, "flap: from a down to its up (default half the period)"}},
       {{"link", {}, "a link (h3r1, l0s1) or a node, for all its links (h3, l1, s0)"},
        {"action", {"down", "up", "flap"}, "flap: a train of --count down/up cycles in this process (prints JSON)"}},
       "", ""},
      {"shape", "rate-limit one direction of a link",
       {kName,
        {"--rate", T::kString, "", {}, false, "e.g. 100mbit (required unless --clear)"},
        {"--burst", T::kString, "", {}, false, "bucket size, e.g. 16kb (default ~1 ms at --rate)"},
        {"--latency", T::kString, "50ms", {}, false, "tbf: max queueing delay (sets the queue limit)"},
        {"--dir", T::kString, "up", {"up", "down", "both", "egress", "ingress"}, false,
         "up: egress at the host/leaf end; down: egress at the leaf/spine end"},
        {"--qdisc", T::kString, "tbf", {"tbf", "htb"}, false, ""},
        {"--clear", T::kFlag, "", {}, false, "remove the shaper"}},
       {{"link", {}, "h3r1, l0s1"}},
       "", ""},
      {"path", "hops a flow takes (asks each namespace's FIB)",
       {kName,
        {"--sport", T::kString, "40000", {}, false, "port or range, e.g. 40000-40063"},
        {"--dport", T::kString, "9000", {}, false, "port or range"},
        {"--proto", T::kString, "udp", {"udp", "tcp"}, false, ""},
        {"--oif", T::kString, "", {}, false, "the source host's interface, e.g. rail1 (a rail-bound socket)"},
        {"--json", T::kFlag, "", {}, false, "one JSON line per flow"}},
       {{"src", {}, "h3 (rail 0), h3r1, h3a (host address) or an IP"}, {"dst", {}, "as src"}},
       "", ""},
      {"counters", "packets and bytes per link and direction (JSON)",
       {kName, {"--links", T::kString, "", {}, false, "only these links, e.g. l0s0,l0s1"}}, {}, "", ""},
      {"show", "summary", {kName}, {}, "", ""},
      {"list", "labs on this machine", {}, {}, "", ""},
      {"exec", "run a command in a node's namespace", {kName}, {{"node", {}, "h3, l0, s1"}}, "cmd",
       "CMD...: the command to run, after the node or a `--` (netlab exec --name N h0 -- ip -br addr)"},
      {"loadgen", "run netlab-loadgen; no args: print its path", {}, {}, "args",
       "ARGS...: netlab-loadgen's arguments (send|sink|owd ...), passed as they are"},
  };
}

// What the help shows for an option's value: the choices, or the name in capitals.
std::string Metavar(const OptionSpec& o) {
  if (!o.choices.empty()) return "{" + Join(o.choices, ",") + "}";
  std::string s = o.name.substr(2);
  std::transform(s.begin(), s.end(), s.begin(), [](char c) { return c == '-' ? '_' : char(std::toupper(c)); });
  return s;
}

std::string ChoiceList(const std::vector<std::string>& choices, bool numeric) {
  std::string s;
  for (const auto& c : choices) s += (s.empty() ? "" : ", ") + (numeric ? c : Quoted(c));
  return s;
}

// Checks a value's type and choices (an int is normalized: "+04" -> "4").
CLI::Validator Check(ArgType type, const std::vector<std::string>& choices) {
  return CLI::Validator(
      [type, choices](std::string& v) -> std::string {
        if (type == ArgType::kInt) {
          const auto n = ParseInt(v);
          if (!n.ok()) return "invalid int value: " + Quoted(v);
          v = std::to_string(*n);
        } else if (type == ArgType::kFloat && !ParseFloat(v).ok()) {
          return "invalid float value: " + Quoted(v);
        }
        if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
          const bool numeric = type == ArgType::kInt;
          return "invalid choice: " + (numeric ? v : Quoted(v)) + " (choose from " + ChoiceList(choices, numeric) + ")";
        }
        return "";
      },
      "");
}

std::string CommandNames() {
  std::string s;
  for (const auto& c : NetlabCommands()) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

ParseOutcome UsageError(const std::string& command, const std::string& message) {
  const std::string who = command.empty() ? "netlab" : "netlab " + command;
  return {ParseOutcome::kUsageError, {}, who + ": error: " + message + "\nRun `" + who + " --help` for usage.\n"};
}

// What a command's parse fills in: one text per option and positional (stable
// addresses for CLI11 to write to), one bool per flag.
struct Storage {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> flags;
};

CLI::App* AddCommand(CLI::App& app, const CommandSpec& c, Storage& st) {
  CLI::App* sub = app.add_subcommand(c.name, c.help);
  for (const auto& o : c.options) {
    if (o.type == ArgType::kFlag) {
      sub->add_flag(o.name, st.flags[o.name], o.help)->disable_flag_override();
      continue;
    }
    CLI::Option* opt = sub->add_option(o.name, st.text[o.name], o.help)->type_name(Metavar(o));
    opt->transform(Check(o.type, o.choices));
    if (o.required) opt->required();
    if (!o.default_value.empty()) opt->default_str(o.default_value);
  }
  for (const auto& p : c.positionals) {
    CLI::Option* opt = sub->add_option(p.name, st.text[p.name], p.help)->required()->type_name("");
    if (!p.choices.empty()) opt->type_name("{" + Join(p.choices, ",") + "}")->transform(Check(ArgType::kString, p.choices));
  }
  if (!c.remainder.empty()) {
    sub->prefix_command();  // the first argument after the positionals starts the remainder
    sub->footer(c.remainder_help);
  }
  return sub;
}

}  // namespace

std::string Args::Get(const std::string& key) const {
  const auto it = values.find(key);
  return it == values.end() ? "" : it->second;
}

long long Args::Int(const std::string& key) const {
  const auto v = ParseInt(Get(key));
  return v.ok() ? *v : 0;
}

double Args::Float(const std::string& key) const {
  const auto v = ParseFloat(Get(key));
  return v.ok() ? *v : 0;
}

const std::vector<CommandSpec>& NetlabCommands() {
  static const std::vector<CommandSpec> commands = BuildCommands();
  return commands;
}

ParseOutcome ParseCommandLine(const std::vector<std::string>& argv) {
  // The command is the first argument that is not an option (the top level
  // has only -h/--help).
  const auto at = std::find_if(argv.begin(), argv.end(), [](const std::string& a) { return a.empty() || a[0] != '-'; });
  const CommandSpec* spec = nullptr;
  for (const auto& c : NetlabCommands()) {
    if (at != argv.end() && c.name == *at) spec = &c;
  }
  const bool help = std::any_of(argv.begin(), at, [](const std::string& a) { return a == "-h" || a == "--help"; });
  if (spec == nullptr && !help) {
    if (at == argv.end()) return UsageError("", "a command is required (" + CommandNames() + ")");
    return UsageError("", "unknown command " + Quoted(*at) + " (choose from " + CommandNames() + ")");
  }
  // exec's command and loadgen's arguments: everything from a `--` on is
  // theirs, untouched (CLI11 would take it as more positionals).
  std::vector<std::string> mine(argv.begin(), argv.end());
  std::vector<std::string> tail;
  if (spec != nullptr && !spec->remainder.empty()) {
    const auto dashes = std::find(at, argv.end(), "--");
    mine.assign(argv.begin(), dashes);
    tail.assign(dashes, argv.end());
  }

  CLI::App app("netlab: an emulated leaf-spine fabric made of Linux network namespaces", "netlab");
  std::map<std::string, Storage> storage;  // command -> what its parse fills in
  std::map<std::string, CLI::App*> subs;
  for (const auto& c : NetlabCommands()) subs[c.name] = AddCommand(app, c, storage[c.name]);
  app.require_subcommand(1);
  app.footer(NetlabDescription());  // after the commands: theirs is their own
  try {
    std::vector<std::string> reversed(mine.rbegin(), mine.rend());  // CLI11 takes them from the back
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return {ParseOutcome::kHelp, {}, app.help()};
  } catch (const CLI::CallForAllHelp&) {
    return {ParseOutcome::kHelp, {}, app.help("", CLI::AppFormatMode::All)};
  } catch (const CLI::ParseError& e) {
    return UsageError(spec != nullptr ? spec->name : "", e.what());
  }

  ParseOutcome out;
  Args& args = out.args;
  args.command = spec->name;
  const CLI::App* sub = subs.at(spec->name);
  const Storage& st = storage.at(spec->name);
  for (const auto& o : spec->options) {
    const std::string key = o.name.substr(2);
    if (o.type == ArgType::kFlag) {
      if (st.flags.at(o.name)) args.values[key] = "1";
    } else if (sub->get_option(o.name)->count() > 0) {
      args.values[key] = st.text.at(o.name);
    } else if (!o.default_value.empty()) {
      args.values[key] = o.default_value;
    }
  }
  for (const auto& p : spec->positionals) args.values[p.name] = st.text.at(p.name);
  if (!spec->remainder.empty()) {
    args.rest = sub->remaining();
    args.rest.insert(args.rest.end(), tail.begin(), tail.end());
  }
  return out;
}

const std::string& NetlabDescription() {
  static const std::string doc = R"(netlab: an emulated leaf-spine fabric made of Linux network namespaces.

Each host is a namespace NAME-hN with one veth per rail (rail0, rail1, ...);
leaves NAME-lN and spines NAME-sN are router namespaces (ip_forward=1); every
leaf has a link to every spine; leaves spread traffic over the spines with
`ip nexthop` groups and a 5-tuple multipath hash, so UDP source ports pick
spines.
netlab plays the fabric's control plane: after a link goes down or up it
recomputes all routes (as BGP would withdraw and re-advertise them). A
`--silent` link failure instead blackholes the link and changes no route: the
gray failure that only probing can find.

Commands (all need root):
  netlab up       --name N [--hosts 8] [--rails 2] [--leaves 2] [--spines 2]
                  [--layout striped|rail] [--miswire h2r0:l1] [--subnet 10.X.0.0/16] [--hash-policy 3|1]
                  [--hash-seed 1] [--link-rate 200mbit] [--napi-threads] [--replace]
  netlab down     --name N
  netlab link     --name N LINK|NODE down|up [--silent [--one-way up|down]] [--delay-ms MS]
  netlab link     --name N LINK|NODE flap [--count 10] [--period-ms 1000] [--down-ms MS]
                  [--silent] [--delay-ms MS]   (one process keeps the timetable; prints
                  the timing it achieved as JSON)
  netlab shape    --name N LINK --rate 100mbit [--burst 16kb] [--latency 50ms]
                  [--dir up|down|both] [--qdisc tbf|htb]
  netlab shape    --name N LINK --clear [--dir up|down|both]
  netlab path     --name N FROM TO [--sport P|P1-P2] [--dport P|P1-P2] [--proto udp|tcp]
                  [--oif rail1]
                  [--json]   (FROM/TO: h3, h3r1 or an IP)
  netlab counters --name N [--links L1,L2]
  netlab show     --name N            netlab list
  netlab exec     --name N NODE -- CMD...
  netlab loadgen  [send|sink|owd ARGS...]   (no args: print the binary's path)

State lives in $NETLAB_ROOT/NAME (default /run/netlab/NAME): topology.json
(read it; its schema is in README.md) and state.json (link states, shapers).
See README.md beside this file for the design, addressing and measurements.
)";
  return doc;
}

}  // namespace lockstep::netlab
