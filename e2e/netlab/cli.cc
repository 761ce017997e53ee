#include "netlab/cli.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "netlab/parse.h"

namespace lockstep::netlab {
namespace {

const OptionSpec kName{"--name", ArgType::kString, "", {}, true, ""};

std::vector<CommandSpec> BuildCommands() {
  using T = ArgType;
  return {
      {"up", "build a lab",
       {kName,
        {"--hosts", T::kInt, "8", {}, false, ""},
        {"--rails", T::kInt, "2", {}, false, ""},
        {"--leaves", T::kInt, "2", {}, false, ""},
        {"--spines", T::kInt, "2", {}, false, ""},
        {"--layout", T::kString, "striped", {"striped", "rail"}, false, ""},
        {"--hash-policy", T::kInt, "3", {"1", "3"}, false,
         "net.ipv4.fib_multipath_hash_policy on routers (3 = 5-tuple fields, see README)"},
        {"--hash-seed", T::kInt, "1", {}, false, "net.ipv4.fib_multipath_hash_seed on routers (0 = kernel's random seed)"},
        {"--subnet", T::kString, "", {}, false, "a private /16 (default 10.<77+index>.0.0/16)"},
        {"--link-rate", T::kString, "", {}, false, "tbf-shape both directions of every host link, e.g. 200mbit"},
        {"--napi-threads", T::kFlag, "", {}, false,
         "forward in napi kernel threads (SCHED_FIFO 1), not in the senders' softirq"},
        {"--replace", T::kFlag, "", {}, false, "tear down an existing lab of that name first"}},
       {},
       ""},
      {"down", "delete a lab (idempotent)", {kName}, {}, ""},
      {"link", "flap a link, or all links of a node",
       {kName,
        {"--silent", T::kFlag, "", {}, false, "blackhole without carrier loss or route change"},
        {"--delay-ms", T::kFloat, "0", {}, false, "wait this long before rerouting"},
        {"--count", T::kInt, "10", {}, false, "flap: down/up cycles"},
        {"--period-ms", T::kFloat, "1000", {}, false, "flap: from one down to the next"},
        {"--down-ms", T::kFloat, "", {}, false, "flap: from a down to its up (default half the period)"}},
       {{"link", {}}, {"action", {"down", "up", "flap"}}},
       ""},
      {"shape", "rate-limit one direction of a link",
       {kName,
        {"--rate", T::kString, "", {}, false, ""},
        {"--burst", T::kString, "", {}, false, "bucket size, e.g. 16kb (default ~1 ms at --rate)"},
        {"--latency", T::kString, "50ms", {}, false, "tbf: max queueing delay (sets the queue limit)"},
        {"--dir", T::kString, "up", {"up", "down", "both", "egress", "ingress"}, false,
         "up: egress at the host/leaf end; down: egress at the leaf/spine end"},
        {"--qdisc", T::kString, "tbf", {"tbf", "htb"}, false, ""},
        {"--clear", T::kFlag, "", {}, false, ""}},
       {{"link", {}}},
       ""},
      {"path", "hops a flow takes (asks each namespace's FIB)",
       {kName,
        {"--sport", T::kString, "40000", {}, false, "port or range, e.g. 40000-40063"},
        {"--dport", T::kString, "9000", {}, false, "port or range"},
        {"--proto", T::kString, "udp", {"udp", "tcp"}, false, ""},
        {"--json", T::kFlag, "", {}, false, ""}},
       {{"src", {}}, {"dst", {}}},
       ""},
      {"counters", "packets and bytes per link and direction (JSON)",
       {kName, {"--links", T::kString, "", {}, false, ""}}, {}, ""},
      {"show", "summary", {kName}, {}, ""},
      {"list", "labs on this machine", {}, {}, ""},
      {"exec", "run a command in a node's namespace", {kName}, {{"node", {}}}, "cmd"},
      {"loadgen", "run netlab-loadgen; no args: print its path", {}, {}, "args"},
  };
}

// What argparse shows for an option's value: the choices, or the name in capitals.
std::string Metavar(const OptionSpec& o) {
  if (!o.choices.empty()) {
    std::string s;
    for (const auto& c : o.choices) s += (s.empty() ? "{" : ",") + c;
    return s + "}";
  }
  std::string s = o.name.substr(2);
  std::transform(s.begin(), s.end(), s.begin(), [](char c) { return c == '-' ? '_' : char(std::toupper(c)); });
  return s;
}

std::string Invocation(const OptionSpec& o) { return o.type == ArgType::kFlag ? o.name : o.name + " " + Metavar(o); }

std::string PositionalName(const PositionalSpec& p) {
  if (p.choices.empty()) return p.name;
  std::string s;
  for (const auto& c : p.choices) s += (s.empty() ? "{" : ",") + c;
  return s + "}";
}

std::string CommandNames() {
  std::string s;
  for (const auto& c : NetlabCommands()) s += (s.empty() ? "" : ",") + c.name;
  return s;
}

std::string TopUsage() { return "usage: netlab [-h] {" + CommandNames() + "} ...\n"; }

std::string Usage(const CommandSpec& c) {
  std::string s = "usage: netlab " + c.name + " [-h]";
  for (const auto& o : c.options) s += o.required ? " " + Invocation(o) : " [" + Invocation(o) + "]";
  for (const auto& p : c.positionals) s += " " + PositionalName(p);
  if (!c.remainder.empty()) s += " ...";
  return s + "\n";
}

std::string HelpLine(const std::string& invocation, const std::string& help) {
  std::string s = "  " + invocation;
  if (help.empty()) return s + "\n";
  return s + (s.size() <= 22 ? std::string(24 - s.size(), ' ') : "\n" + std::string(24, ' ')) + help + "\n";
}

std::string Help(const CommandSpec& c) {
  std::string s = Usage(c) + "\n";
  if (!c.positionals.empty() || !c.remainder.empty()) {
    s += "positional arguments:\n";
    for (const auto& p : c.positionals) s += HelpLine(PositionalName(p), "");
    if (!c.remainder.empty()) s += HelpLine(c.remainder, "");
    s += "\n";
  }
  s += "options:\n" + HelpLine("-h, --help", "show this help message and exit");
  for (const auto& o : c.options) s += HelpLine(Invocation(o), o.help);
  return s;
}

std::string ChoiceList(const std::vector<std::string>& choices, bool numeric) {
  std::string s;
  for (const auto& c : choices) s += (s.empty() ? "" : ", ") + (numeric ? c : Quoted(c));
  return s;
}

bool LooksLikeOption(const std::string& a) {
  static const std::regex negative(R"(^-\d+$|^-\d*\.\d+$)");
  return a.size() > 1 && a[0] == '-' && !std::regex_match(a, negative);
}

class Parser {
 public:
  // extras: unknown options that came before the command name.
  Parser(const CommandSpec& c, std::vector<std::string> extras) : c_(c), extras_(std::move(extras)) {
    out_.args.command = c.name;
  }

  ParseOutcome Parse(const std::vector<std::string>& argv) {
    for (size_t i = 0; i < argv.size() && out_.kind == ParseOutcome::kOk; ++i) {
      const std::string& a = argv[i];
      const bool positional = dashdash_ || !LooksLikeOption(a);
      if (RemainderNext() && (positional || a == "--")) {  // loadgen's arguments
        out_.args.rest.assign(argv.begin() + long(i), argv.end());
        break;
      }
      if (a == "--" && !dashdash_) {
        dashdash_ = true;
      } else if (positional) {
        if (Positional(a) && RemainderNext()) {  // exec's command follows its node
          out_.args.rest.assign(argv.begin() + long(i) + 1, argv.end());
          break;
        }
      } else {
        i = Option(argv, i);
      }
    }
    if (out_.kind == ParseOutcome::kOk) Finish();
    return out_;
  }

 private:
  // True once every positional is filled and the command takes a remainder.
  bool RemainderNext() const { return !c_.remainder.empty() && next_pos_ == c_.positionals.size(); }

  // Stores the next positional; false when there is none left or on an error.
  bool Positional(const std::string& a) {
    if (next_pos_ == c_.positionals.size()) {
      extras_.push_back(a);
      return false;
    }
    const PositionalSpec& p = c_.positionals[next_pos_++];
    if (!p.choices.empty() && std::find(p.choices.begin(), p.choices.end(), a) == p.choices.end()) {
      Fail("argument " + p.name + ": invalid choice: " + Quoted(a) + " (choose from " +
           ChoiceList(p.choices, false) + ")");
      return false;
    }
    out_.args.values[p.name] = a;
    return true;
  }

  // Handles the option at argv[i]; returns the index of the last argument used.
  size_t Option(const std::vector<std::string>& argv, size_t i) {
    const std::string& a = argv[i];
    const auto eq = a.find('=');
    const OptionSpec* o = Lookup(a.substr(0, eq), a);
    if (o == nullptr) return i;
    if (o->type == ArgType::kFlag && eq != std::string::npos) {
      Fail("argument " + o->name + ": ignored explicit argument " + Quoted(a.substr(eq + 1)));
    } else if (o->name == "--help") {
      out_.kind = ParseOutcome::kHelp;
      out_.text = Help(c_);
    } else if (o->type == ArgType::kFlag) {
      out_.args.values[o->name.substr(2)] = "1";
    } else if (eq != std::string::npos) {
      Store(*o, a.substr(eq + 1));
    } else if (i + 1 < argv.size() && !LooksLikeOption(argv[i + 1])) {
      Store(*o, argv[++i]);
    } else {
      Fail("argument " + o->name + ": expected one argument");
    }
    return i;
  }

  // The option `flag` names, exactly or as a unique prefix; nullptr when
  // unknown (then `arg` is reported as unrecognized) or ambiguous.
  const OptionSpec* Lookup(const std::string& flag, const std::string& arg) {
    static const OptionSpec help{"--help", ArgType::kFlag, "", {}, false, ""};
    if (flag == "-h") return &help;
    std::vector<const OptionSpec*> matches;
    if (flag.rfind("--", 0) == 0 && flag.size() > 2) {
      if (help.name.rfind(flag, 0) == 0) matches.push_back(&help);
      for (const auto& o : c_.options) {
        if (o.name == flag) return &o;
        if (o.name.rfind(flag, 0) == 0) matches.push_back(&o);
      }
    }
    if (matches.size() == 1) return matches[0];
    if (matches.empty()) {
      extras_.push_back(arg);
      return nullptr;
    }
    std::string names;
    for (const auto* m : matches) names += (names.empty() ? "" : ", ") + m->name;
    Fail("ambiguous option: " + flag + " could match " + names);
    return nullptr;
  }

  void Store(const OptionSpec& o, const std::string& value) {
    const std::string key = o.name.substr(2);
    std::string text = value;
    if (o.type == ArgType::kInt) {
      const auto v = ParseInt(value);
      if (!v.ok()) return Fail("argument " + o.name + ": invalid int value: " + Quoted(value));
      text = std::to_string(*v);
    } else if (o.type == ArgType::kFloat && !ParseFloat(value).ok()) {
      return Fail("argument " + o.name + ": invalid float value: " + Quoted(value));
    }
    if (!o.choices.empty() && std::find(o.choices.begin(), o.choices.end(), text) == o.choices.end()) {
      const bool numeric = o.type == ArgType::kInt;
      return Fail("argument " + o.name + ": invalid choice: " + (numeric ? text : Quoted(text)) +
                  " (choose from " + ChoiceList(o.choices, numeric) + ")");
    }
    out_.args.values[key] = text;
  }

  // Fills in defaults; reports what is missing, then what was not recognized.
  void Finish() {
    std::vector<std::string> missing;
    for (const auto& o : c_.options) {
      const std::string key = o.name.substr(2);
      if (o.required && !out_.args.Has(key)) missing.push_back(o.name);
      if (!o.required && !out_.args.Has(key) && !o.default_value.empty()) out_.args.values[key] = o.default_value;
    }
    for (size_t p = next_pos_; p < c_.positionals.size(); ++p) missing.push_back(c_.positionals[p].name);
    if (!missing.empty()) {
      Fail("the following arguments are required: " + Join(missing, ", "));
    } else if (!extras_.empty()) {  // reported by the top level, as argparse does
      out_.kind = ParseOutcome::kUsageError;
      out_.text = TopUsage() + "netlab: error: unrecognized arguments: " + Join(extras_, " ") + "\n";
    }
  }

  void Fail(const std::string& message) {
    if (out_.kind != ParseOutcome::kOk) return;
    out_.kind = ParseOutcome::kUsageError;
    out_.text = Usage(c_) + "netlab " + c_.name + ": error: " + message + "\n";
  }

  const CommandSpec& c_;
  std::vector<std::string> extras_;
  ParseOutcome out_;
  size_t next_pos_ = 0;
  bool dashdash_ = false;
};

ParseOutcome TopError(const std::string& message) {
  return {ParseOutcome::kUsageError, {}, TopUsage() + "netlab: error: " + message + "\n"};
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
  std::vector<std::string> extras;
  size_t i = 0;
  for (; i < argv.size() && LooksLikeOption(argv[i]); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" || (a.size() > 2 && std::string("--help").rfind(a, 0) == 0)) {
      return {ParseOutcome::kHelp, {}, TopUsage() + "\n" + NetlabDescription()};
    }
    extras.push_back(a);
  }
  if (i == argv.size()) return TopError("the following arguments are required: cmd");
  for (const auto& c : NetlabCommands()) {
    if (c.name == argv[i]) return Parser(c, extras).Parse({argv.begin() + long(i) + 1, argv.end()});
  }
  std::string names;
  for (const auto& c : NetlabCommands()) names += (names.empty() ? "" : ", ") + Quoted(c.name);
  return TopError("argument cmd: invalid choice: " + Quoted(argv[i]) + " (choose from " + names + ")");
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
                  [--layout striped|rail] [--subnet 10.X.0.0/16] [--hash-policy 3|1]
                  [--hash-seed 1] [--link-rate 200mbit] [--napi-threads] [--replace]
  netlab down     --name N
  netlab link     --name N LINK|NODE down|up [--silent] [--delay-ms MS]
  netlab link     --name N LINK|NODE flap [--count 10] [--period-ms 1000] [--down-ms MS]
                  [--silent] [--delay-ms MS]   (one process keeps the timetable; prints
                  the timing it achieved as JSON)
  netlab shape    --name N LINK --rate 100mbit [--burst 16kb] [--latency 50ms]
                  [--dir up|down|both] [--qdisc tbf|htb]
  netlab shape    --name N LINK --clear [--dir up|down|both]
  netlab path     --name N FROM TO [--sport P|P1-P2] [--dport P|P1-P2] [--proto udp|tcp]
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
