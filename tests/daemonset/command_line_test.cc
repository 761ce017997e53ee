#include <catch2/catch.hpp>

#include "lockstep/agent/app/command_line.h"

namespace lockstep::agent {
namespace {

TEST_CASE("run flags accept --flag value and --flag=value", "[daemonset][cli]") {
  auto cl = ParseCommandLine({"--config=/etc/a.yaml", "--node-name", "n1", "--probe-port=0", "--seed", "42",
                              "--virtual-clock", "offset_ns=5,drift_ppb=1", "--health-addr=127.0.0.1:0"});
  REQUIRE(cl.ok());
  REQUIRE(cl->command == CommandLine::Command::kRun);
  REQUIRE(cl->config_path == "/etc/a.yaml");
  REQUIRE(*cl->node_name == "n1");
  REQUIRE(*cl->probe_port == 0);
  REQUIRE(*cl->seed == 42);
  AgentConfig config;
  REQUIRE(ApplyOverrides(*cl, config).ok());
  REQUIRE(config.node_name == "n1");
  REQUIRE(config.probe.port == 0);
  REQUIRE(config.health_addr == HostPort{"127.0.0.1", 0});
}

TEST_CASE("Kubernetes mode flags", "[daemonset][cli]") {
  auto cl = ParseCommandLine({"--config=a", "--server", "https://127.0.0.1:6443", "--token-file=/t",
                              "--certificate-authority", "/ca", "--advertise-address", "10.0.0.7",
                              "--report-interval=3", "--node-address-fallback=false"});
  REQUIRE(cl.ok());
  REQUIRE(cl->server == "https://127.0.0.1:6443");
  REQUIRE(cl->token_file == "/t");
  REQUIRE(cl->certificate_authority == "/ca");
  REQUIRE(*cl->advertise_address == "10.0.0.7");
  REQUIRE(cl->report_interval_seconds == 3);
  REQUIRE_FALSE(cl->node_address_fallback);
  auto defaults = ParseCommandLine({"--config=a", "--kubeconfig", "/k", "--context", "c"});
  REQUIRE(defaults->kubeconfig == "/k");
  REQUIRE(defaults->kube_context == "c");
  REQUIRE(defaults->report_interval_seconds == 10);
  REQUIRE(defaults->node_address_fallback);
  REQUIRE(ParseCommandLine({"--config=a", "--server", "https://x"}).error().message.find("--token-file") !=
          std::string::npos);
  REQUIRE_FALSE(ParseCommandLine({"--config=a", "--advertise-address", "node-1"}).ok());
  REQUIRE_FALSE(ParseCommandLine({"--config=a", "--report-interval", "0"}).ok());
  REQUIRE_FALSE(ParseCommandLine({"--config=a", "--node-address-fallback", "yes"}).ok());
}

TEST_CASE("clock status takes --addr and --json", "[daemonset][cli]") {
  auto cl = ParseCommandLine({"clock", "status", "--addr", "127.0.0.1:9700", "--json"});
  REQUIRE(cl.ok());
  REQUIRE(cl->command == CommandLine::Command::kClockStatus);
  REQUIRE(cl->status_addr == "127.0.0.1:9700");
  REQUIRE(cl->json);
  REQUIRE(ParseCommandLine({"clock", "status"})->status_addr == "127.0.0.1:9611");
}

TEST_CASE("fabric status takes --addr and --json", "[daemonset][cli]") {
  auto cl = ParseCommandLine({"fabric", "status", "--addr", "127.0.0.1:9700", "--json"});
  REQUIRE(cl.ok());
  REQUIRE(cl->command == CommandLine::Command::kFabricStatus);
  REQUIRE(cl->status_addr == "127.0.0.1:9700");
  REQUIRE(cl->json);
  REQUIRE(ParseCommandLine({"fabric", "status"})->status_addr == "127.0.0.1:9611");
  REQUIRE(ParseCommandLine({"fabric"}).error().message.find("fabric status") != std::string::npos);
  REQUIRE_FALSE(ParseCommandLine({"fabric", "status", "--addr", "nowhere"}).ok());
}

TEST_CASE("command line errors are clear", "[daemonset][cli]") {
  REQUIRE(ParseCommandLine({}).error().message.find("--config PATH is required") != std::string::npos);
  REQUIRE(ParseCommandLine({"--config", "a", "--bogus"}).error().message.find("--bogus") != std::string::npos);
  REQUIRE(ParseCommandLine({"--config"}).error().message.find("--config") != std::string::npos);
  const std::string range = ParseCommandLine({"--config", "a", "--probe-port", "99999"}).error().message;
  REQUIRE(range.find("--probe-port") != std::string::npos);
  REQUIRE(range.find("0 to 65535") != std::string::npos);
  REQUIRE(range.find("--help") != std::string::npos);  // every error points at the usage
  // Flags belong to their command.
  REQUIRE_FALSE(ParseCommandLine({"clock", "status", "--config", "a"}).ok());
  REQUIRE_FALSE(ParseCommandLine({"--config", "a", "--json"}).ok());
  REQUIRE_FALSE(ParseCommandLine({"frobnicate"}).ok());
  REQUIRE_FALSE(ParseCommandLine({"--config", "a", "--log-level", "loud"}).ok());
  REQUIRE(ParseCommandLine({"clock"}).error().message.find("clock status") != std::string::npos);
  REQUIRE_FALSE(ParseCommandLine({"clock", "status", "--addr", "nowhere"}).ok());
  REQUIRE(ParseCommandLine({"--help"})->command == CommandLine::Command::kHelp);
  REQUIRE(ParseCommandLine({"version"})->command == CommandLine::Command::kVersion);
  REQUIRE(ParseCommandLine({"help"})->command == CommandLine::Command::kHelp);
  REQUIRE(ParseCommandLine({"clock", "status", "--help"})->command == CommandLine::Command::kHelp);
  auto explicit_run = ParseCommandLine({"run", "--config", "a", "--seed=7"});
  REQUIRE(explicit_run.ok());
  REQUIRE(explicit_run->command == CommandLine::Command::kRun);
  REQUIRE(*explicit_run->seed == 7);
  AgentConfig config;
  auto cl = ParseCommandLine({"--config", "a", "--health-addr", "9610"});
  REQUIRE(cl.ok());
  REQUIRE_FALSE(ApplyOverrides(*cl, config).ok());
}

}  // namespace
}  // namespace lockstep::agent
