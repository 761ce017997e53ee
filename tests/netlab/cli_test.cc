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

// The first line of a usage error: "netlab CMD: error: MESSAGE".
std::string Error(const Argv& argv) {
  const ParseOutcome p = ParseCommandLine(argv);
  INFO(p.text);
  REQUIRE(p.kind == ParseOutcome::kUsageError);
  REQUIRE(p.text.find("--help` for usage.") != std::string::npos);
  return p.text.substr(0, p.text.find('\n'));
}

TEST_CASE("cli: defaults and typed options", "[netlab]") {
  Args a = Ok({"up", "--name", "lab"});
  CHECK(a.command == "up");
  CHECK(a.Get("name") == "lab");
  CHECK(a.Int("hosts") == 8);
  CHECK(a.Get("layout") == "striped");
  CHECK(a.Int("hash-policy") == 3);
  CHECK(a.Get("subnet").empty());
  CHECK_FALSE(a.Has("subnet"));
  CHECK_FALSE(a.Flag("replace"));

  a = Ok({"up", "--name=lab", "--hosts", "+04", "--hash-seed", "-1", "--layout=rail", "--replace", "--napi-threads"});
  CHECK(a.Get("hosts") == "4");  // ints are normalized
  CHECK(a.Int("hash-seed") == -1);
  CHECK(a.Get("layout") == "rail");
  CHECK(a.Flag("replace"));
  CHECK(a.Flag("napi-threads"));
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
  CHECK(a.Get("oif").empty());
  a = Ok({"path", "--name", "lab", "h0a", "h1a", "--oif", "rail1"});
  CHECK(a.Get("oif") == "rail1");
  a = Ok({"link", "--name", "lab", "l0s1", "down", "--silent", "--one-way", "up"});
  CHECK(a.Get("one-way") == "up");
  CHECK(Ok({"link", "--name", "lab", "l0s1", "down", "--silent"}).Get("one-way").empty());
  CHECK(Error({"link", "--name", "lab", "l0s1", "down", "--silent", "--one-way", "left"})
            .rfind("netlab link: error: ", 0) == 0);
}

TEST_CASE("cli: link flap", "[netlab]") {
  Args a = Ok({"link", "--name", "lab", "h1r0", "flap", "--count", "3", "--period-ms", "7500", "--down-ms", "7000"});
  CHECK(a.Get("action") == "flap");
  CHECK(a.Int("count") == 3);
  CHECK(a.Float("period-ms") == 7500);
  CHECK(a.Float("down-ms") == 7000);
  a = Ok({"link", "--name", "lab", "h1r0", "flap"});
  CHECK(a.Int("count") == 10);
  CHECK(a.Float("period-ms") == 1000);
  CHECK_FALSE(a.Has("down-ms"));  // half the period
}

TEST_CASE("cli: every way the e2e scripts and benchmarks call netlab", "[netlab]") {
  Ok({"up", "--name", "fb1", "--hosts", "4", "--rails", "2", "--leaves", "2", "--spines", "2", "--link-rate", "200mbit",
      "--replace", "--napi-threads"});
  Ok({"up", "--name", "lab", "--hosts", "4", "--rails", "2", "--layout", "rail", "--subnet", "10.90.0.0/16"});
  Ok({"down", "--name", "lab"});
  Ok({"link", "--name", "lab", "h1r0", "down", "--silent"});
  Ok({"shape", "--name", "lab", "h0r0", "--rate", "200mbit", "--latency", "5ms", "--dir", "both"});
  Ok({"shape", "--name", "lab", "l0s0", "--clear"});
  Ok({"shape", "--name", "lab", "l0s0", "--rate", "10mbit", "--burst", "16kb", "--qdisc", "htb", "--dir", "egress"});
  Ok({"path", "--name", "lab", "h0a", "h1a", "--proto", "tcp", "--sport", "41000", "--dport", "5000", "--json"});
  Ok({"counters", "--name", "lab", "--links", "h0r0"});
  Ok({"counters", "--name", "lab"});
  Ok({"show", "--name", "lab"});
}

TEST_CASE("cli: exec and loadgen pass the rest through", "[netlab]") {
  Args a = Ok({"exec", "--name", "lab", "h0", "--", "ip", "-br", "addr"});
  CHECK(a.Get("node") == "h0");
  CHECK(a.rest == Argv{"--", "ip", "-br", "addr"});
  CHECK(Ok({"exec", "--name", "lab", "h0", "ping", "-c1", "10.77.0.2"}).rest == Argv{"ping", "-c1", "10.77.0.2"});
  CHECK(Ok({"exec", "h0", "--name", "lab", "sh", "-c", "a -- b", "--", "x"}).rest ==
        Argv{"sh", "-c", "a -- b", "--", "x"});
  CHECK(Ok({"loadgen", "send", "--ns", "lab-h0", "--rate", "1mbit"}).rest ==
        Argv{"send", "--ns", "lab-h0", "--rate", "1mbit"});
  CHECK(Ok({"loadgen", "--", "sink", "--help"}).rest == Argv{"--", "sink", "--help"});
  CHECK(Ok({"loadgen"}).rest.empty());
  CHECK(Ok({"list"}).command == "list");
}

TEST_CASE("cli: help", "[netlab]") {
  CHECK(ParseCommandLine({"-h"}).kind == ParseOutcome::kHelp);
  const ParseOutcome top = ParseCommandLine({"--help"});
  CHECK(top.text.find("Commands (all need root):") != std::string::npos);
  CHECK(top.text.find("loadgen") != std::string::npos);
  const ParseOutcome up = ParseCommandLine({"up", "--name", "lab", "-h"});
  CHECK(up.kind == ParseOutcome::kHelp);
  CHECK(up.text.find("build a lab") != std::string::npos);
  CHECK(up.text.find("--napi-threads") != std::string::npos);
  CHECK(up.text.find("forward in napi kernel threads (SCHED_FIFO 1)") != std::string::npos);
  CHECK(up.text.find("Commands (all need root):") == std::string::npos);  // only the top level's
  CHECK(ParseCommandLine({"link", "--help"}).text.find("{down,up,flap}") != std::string::npos);
  CHECK(ParseCommandLine({"loadgen", "--help"}).kind == ParseOutcome::kHelp);
}

TEST_CASE("cli: usage errors say what was wrong", "[netlab]") {
  CHECK(Error({}) ==
        "netlab: error: a command is required (up, down, link, shape, path, counters, show, list, exec, loadgen)");
  CHECK(Error({"bogus"}) == "netlab: error: unknown command 'bogus' (choose from up, down, link, shape, path, "
                            "counters, show, list, exec, loadgen)");
  CHECK(Error({"up"}) == "netlab up: error: --name is required");
  CHECK(Error({"up", "--name", "a", "--hosts", "x"}) == "netlab up: error: --hosts: invalid int value: 'x'");
  CHECK(Error({"up", "--name", "a", "--layout", "ring"}) ==
        "netlab up: error: --layout: invalid choice: 'ring' (choose from 'striped', 'rail')");
  CHECK(Error({"up", "--name", "a", "--hash-policy", "2"}) ==
        "netlab up: error: --hash-policy: invalid choice: 2 (choose from 1, 3)");
  CHECK(Error({"up", "--name"}).rfind("netlab up: error: --name", 0) == 0);
  CHECK(Error({"link", "--name", "a"}) == "netlab link: error: link is required");
  CHECK(Error({"link", "--name", "a", "h0", "sideways"}) ==
        "netlab link: error: action: invalid choice: 'sideways' (choose from 'down', 'up', 'flap')");
  CHECK(Error({"link", "--name", "a", "h0", "down", "--silent=1"}).rfind("netlab link: error: ", 0) == 0);
  CHECK(Error({"link", "--name", "a", "h0", "down", "--delay-ms", "soon"}) ==
        "netlab link: error: --delay-ms: invalid float value: 'soon'");
  CHECK(Error({"up", "--name", "a", "--foo", "1"}).find("--foo") != std::string::npos);
  CHECK(Error({"up", "--name", "a", "--host", "4"}).find("--host") != std::string::npos);  // no prefixes
  CHECK(Error({"--foo", "show", "--name", "a"}).find("--foo") != std::string::npos);
  CHECK(Error({"show", "--name", "a", "extra"}).find("extra") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::netlab
