#include "operator_scale_cluster.h"

#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "lockstep/kube/kube_config.h"
#include "operator_scale_metrics.h"

namespace lockstep::bench {
namespace {

namespace fs = std::filesystem;

// DIR/env holds `export KEY=VALUE` lines written with printf %q.
EnvVars ReadEnvFile(const std::string& path) {
  EnvVars env;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("export ", 0) != 0) continue;
    line = line.substr(7);
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value;
    for (size_t i = eq + 1; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      if (line[i] != '\'') value += line[i];
    }
    env[line.substr(0, eq)] = value;
  }
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The value of "key":"value" in a JSON log line, without a JSON parser.
std::string LogField(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":\"";
  size_t p = line.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  return line.substr(p, line.find('"', p) - p);
}

}  // namespace

BenchCluster::BenchCluster(BenchClusterOptions options) : options_(std::move(options)) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/lockstep-operator-scale.XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) root_ = tmpl;
}

BenchCluster::~BenchCluster() {
  if (operator_pid_ > 0) {
    StopProcess(operator_pid_, std::chrono::seconds(10));
    std::error_code ec;
    fs::remove(cluster_dir_ + "/pids/operator-bench.pid", ec);
  }
  bool down_ok = true;
  if (!cluster_dir_.empty()) {
    std::cerr << "[operator-scale] stopping the cluster in " << cluster_dir_ << "\n";
    auto down = RunCommand({options_.repo + "/e2e/cluster/down", cluster_dir_, "--purge"}, {}, root_ + "/down.log");
    if (!down.ok()) {
      down_ok = false;
      std::cerr << "[operator-scale] WARNING: " << down.error().message << "\n";
    }
  }
  if (root_.empty()) return;
  if (options_.keep || !down_ok) {
    std::cerr << "[operator-scale] logs kept in " << root_ << "\n";
  } else {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
}

Status BenchCluster::Up() {
  if (root_.empty()) return Internal("could not create a temp dir under $TMPDIR or /tmp");
  const std::string up = options_.repo + "/e2e/cluster/up";
  if (::access(up.c_str(), X_OK) != 0) {
    return InvalidArgument(up + " not found: run from the repository root or pass --repo");
  }
  cluster_dir_ = root_ + "/cluster";  // set first: the destructor tears down a half-started cluster too
  auto out = RunCommand({up, "--nodes", "0", "--cpu-nodes", std::to_string(options_.cpu_nodes), "--node-lease-seconds",
                         std::to_string(options_.node_lease_seconds), "--dir", cluster_dir_},
                        {}, root_ + "/up.log");
  if (!out.ok()) return out.error();
  env_ = ReadEnvFile(cluster_dir_ + "/env");
  for (const char* k : {"KUBECONFIG", "LOCKSTEP_K8S_BIN", "LOCKSTEP_APISERVER", "LOCKSTEP_CA_CERT"}) {
    if (env_[k].empty()) return Internal(cluster_dir_ + "/env has no " + k);
  }
  return Status::Ok();
}

Result<std::string> BenchCluster::Tool(const std::string& name, std::vector<std::string> args,
                                       const std::string& log) const {
  args.insert(args.begin(), env_.at("LOCKSTEP_K8S_BIN") + "/" + name);
  EnvVars env = {{"KUBECONFIG", env_.at("KUBECONFIG")},
                 {"HELM_CACHE_HOME", root_ + "/helm/cache"},
                 {"HELM_CONFIG_HOME", root_ + "/helm/config"},
                 {"HELM_DATA_HOME", root_ + "/helm/data"}};
  return RunCommand(args, env, log);
}

Status BenchCluster::InstallChart() {
  auto helm = Tool("helm",
                   {"install", "lockstep", options_.repo + "/charts/lockstep", "--namespace", kNamespace,
                    "--create-namespace", "--set", "operator.replicas=0"},
                   root_ + "/helm.log");
  if (!helm.ok()) return helm.error();
  auto token = Tool("kubectl", {"-n", kNamespace, "create", "token", "lockstep-operator", "--duration=4h"},
                    root_ + "/kubectl.log");
  if (!token.ok()) return token.error();
  std::ofstream(cluster_dir_ + "/operator.token") << *token;
  return Status::Ok();
}

Status BenchCluster::StartOperator(Nanos timeout) {
  if (::access(options_.operator_binary.c_str(), X_OK) != 0) {
    return InvalidArgument(options_.operator_binary +
                           " not found: build it (cmake --build --preset dev --target lockstep-operator) "
                           "or pass --operator");
  }
  const std::string log = root_ + "/operator.log";
  std::vector<std::string> argv = {options_.operator_binary,
                                   "--server=" + env_.at("LOCKSTEP_APISERVER"),
                                   "--token-file=" + cluster_dir_ + "/operator.token",
                                   "--certificate-authority=" + env_.at("LOCKSTEP_CA_CERT"),
                                   std::string("--namespace=") + kNamespace,
                                   "--identity=operator-scale",
                                   "--metrics-addr=127.0.0.1:0",
                                   "--health-addr=127.0.0.1:0",
                                   "--agent-service-account=lockstep-agent",
                                   "--probe-key-secret=lockstep-probe-key"};
  argv.insert(argv.end(), options_.operator_flags.begin(), options_.operator_flags.end());
  auto pid = SpawnProcess(argv, log);
  if (!pid.ok()) return pid.error();
  operator_pid_ = *pid;
  // e2e/cluster/down also stops what is recorded here, should we die first.
  std::ofstream(cluster_dir_ + "/pids/operator-bench.pid") << operator_pid_ << "\n";

  auto deadline = std::chrono::steady_clock::now() + timeout;
  int health_port = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!OperatorRunning()) return Unavailable("the operator exited at startup:\n" + OperatorLogTail(20));
    if (health_port == 0) {
      std::istringstream lines(ReadFile(log));
      for (std::string line; std::getline(lines, line);) {
        if (line.find("\"msg\":\"serving\"") == std::string::npos) continue;
        metrics_port_ = std::atoi(LogField(line, "metrics_port").c_str());
        health_port = std::atoi(LogField(line, "health_port").c_str());
      }
    }
    if (health_port != 0) {
      auto ready = HttpGet(health_port, "/readyz", std::chrono::seconds(2));
      if (ready.ok() && ready->find("leader: yes") != std::string::npos) return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Unavailable("the operator did not become ready and leader in time:\n" + OperatorLogTail(20));
}

Result<std::unique_ptr<kube::CurlKubeApi>> BenchCluster::AdminApi(Clock& clock) const {
  auto config = kube::LoadKubeConfigFile(env_.at("KUBECONFIG"));
  if (!config.ok()) return config.error();
  return kube::CurlKubeApi::FromConfig(*config, clock, {.user_agent = "lockstep-operator-scale"});
}

bool BenchCluster::OperatorRunning() const { return operator_pid_ > 0 && ChildRunning(operator_pid_); }

std::string BenchCluster::OperatorLogTail(int n) const {
  std::istringstream in(ReadFile(root_ + "/operator.log"));
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > n) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += l + "\n";
  return out;
}

}  // namespace lockstep::bench
