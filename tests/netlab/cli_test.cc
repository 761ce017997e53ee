#include <catch2/catch.hpp>

#include "netlab/cli.h"

namespace lockstep::netlab {
namespace {

using Argv = std::vector<std::string>;

Args Ok(const Argv& argv) {
  const ParseOutcome p = ParseCommandLine(argv);
  INFO(p.text);
  REQUIRE(p.kind == ParseOutcome::kOk);
  return p.args;
}

// The last line of a usage error: "netlab CMD: error: MESSAGE".
std::string Error(const Argv& argv) {
  const ParseOutcome p = ParseCommandLine(argv);
  REQUIRE(p.kind == ParseOutcome::kUsageError);
  REQUIRE(p.text.rfind("usage: netlab ", 0) == 0);
  const std::string text = p.text.substr(0, p.text.size() - 1);
  return text.substr(text.rfind('\n') + 1);
}

TEST_CASE("cli: defaults and typed options", "[netlab]") {
  Args a = Ok({"up", "--name", "lab"});
  CHECK(a.command == "up");
  CHECK(a.Get("name") == "lab");
  CHECK(a.Int("hosts") == 8);
  CHECK(a.Get("layout") == "striped");
  CHECK(a.Int("hash-policy") == 3);
  CHECK(a.Get("subnet").empty());
  CHECK_FALSE(a.Flag("replace"));

  a = Ok({"up", "--name=lab", "--host", "4", "--hash-seed", "-1", "--layout=rail", "--replace"});
  CHECK(a.Int("hosts") == 4);  // a unique prefix is enough
  CHECK(a.Int("hash-seed") == -1);
  CHECK(a.Get("layout") == "rail");
  CHECK(a.Flag("replace"));
}

TEST_CASE("cli: options and positionals in any order", "[netlab]") {
  Args a = Ok({"link", "h1r0", "--name", "lab", "down", "--silent", "--delay-ms", "250"});
  CHECK(a.Get("link") == "h1r0");
  CHECK(a.Get("action") == "down");
  CHECK(a.Flag("silent"));
  CHECK(a.Float("delay-ms") == 250);
  a = Ok({"path", "--name", "lab", "h0r0", "h1r0", "--sport", "42000-42063", "--json"});
  CHECK(a.Get("src") == "h0r0");
  CHECK(a.Get("dst") == "h1r0");
  CHECK(a.Get("dport") == "9000");
  CHECK(a.Get("proto") == "udp");
}

TEST_CASE("cli: exec and loadgen pass the rest through", "[netlab]") {
  Args a = Ok({"exec", "--name", "lab", "h0", "--", "ip", "-br", "addr"});
  CHECK(a.Get("node") == "h0");
  CHECK(a.rest == Argv{"--", "ip", "-br", "addr"});
  CHECK(Ok({"exec", "--name", "lab", "h0", "ping", "-c1", "10.77.0.2"}).rest == Argv{"ping", "-c1", "10.77.0.2"});
  CHECK(Ok({"loadgen", "send", "--ns", "lab-h0", "--rate", "1mbit"}).rest ==
        Argv{"send", "--ns", "lab-h0", "--rate", "1mbit"});
  CHECK(Ok({"loadgen"}).rest.empty());
  CHECK(Ok({"list"}).command == "list");
}

TEST_CASE("cli: help", "[netlab]") {
  CHECK(ParseCommandLine({"-h"}).kind == ParseOutcome::kHelp);
  CHECK(ParseCommandLine({"--help"}).text.find("Commands (all need root):") != std::string::npos);
  const ParseOutcome up = ParseCommandLine({"up", "--name", "lab", "-h"});
  CHECK(up.kind == ParseOutcome::kHelp);
  CHECK(up.text.rfind("usage: netlab up [-h] --name NAME [--hosts HOSTS]", 0) == 0);
  CHECK(ParseCommandLine({"loadgen", "--help"}).kind == ParseOutcome::kHelp);
}

TEST_CASE("cli: usage errors read as argparse's", "[netlab]") {
  CHECK(Error({}) == "netlab: error: the following arguments are required: cmd");
  CHECK(Error({"bogus"}) == "netlab: error: argument cmd: invalid choice: 'bogus' (choose from 'up', 'down', "
                            "'link', 'shape', 'path', 'counters', 'show', 'list', 'exec', 'loadgen')");
  CHECK(Error({"up"}) == "netlab up: error: the following arguments are required: --name");
  CHECK(Error({"up", "--h", "4"}) ==
        "netlab up: error: ambiguous option: --h could match --help, --hosts, --hash-policy, --hash-seed");
  CHECK(Error({"up", "--name", "a", "--hosts", "x"}) == "netlab up: error: argument --hosts: invalid int value: 'x'");
  CHECK(Error({"up", "--name", "a", "--layout", "ring"}) ==
        "netlab up: error: argument --layout: invalid choice: 'ring' (choose from 'striped', 'rail')");
  CHECK(Error({"up", "--name", "a", "--hash-policy", "2"}) ==
        "netlab up: error: argument --hash-policy: invalid choice: 2 (choose from 1, 3)");
  CHECK(Error({"up", "--name"}) == "netlab up: error: argument --name: expected one argument");
  CHECK(Error({"link", "--name", "a"}) == "netlab link: error: the following arguments are required: link, action");
  CHECK(Error({"link", "--name", "a", "h0", "sideways"}) ==
        "netlab link: error: argument action: invalid choice: 'sideways' (choose from 'down', 'up', 'flap')");
  CHECK(Error({"link", "--name", "a", "h0", "down", "--silent=1"}) ==
        "netlab link: error: argument --silent: ignored explicit argument '1'");
  CHECK(Error({"link", "--name", "a", "h0", "down", "--delay-ms", "soon"}) ==
        "netlab link: error: argument --delay-ms: invalid float value: 'soon'");
  CHECK(Error({"up", "--name", "a", "--foo", "1"}) == "netlab: error: unrecognized arguments: --foo 1");
  CHECK(Error({"--foo", "show", "--name", "a"}) == "netlab: error: unrecognized arguments: --foo");
  CHECK(Error({"show", "--name", "a", "extra"}) == "netlab: error: unrecognized arguments: extra");
}

}  // namespace
}  // namespace lockstep::netlab
