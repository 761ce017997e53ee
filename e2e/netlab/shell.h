// Running ip/tc and touching namespaces: the only place netlab has side
// effects on the network. Commands run with fork/exec (no shell).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lockstep/common/result.h"
#include "netlab/routes.h"

namespace lockstep::netlab {

// "netlab: MESSAGE" on stderr.
void Log(const std::string& message);

// Ctrl-C while a command runs makes that Run() fail with "interrupted", so
// callers can clean up (as `up` does); InterruptSeen() tells main to then die
// of SIGINT.
void CatchInterrupts();
bool InterruptSeen();

struct RunResult {
  int rc = 0;
  std::string out, err;
};

// Runs argv (looked up in PATH) with `input` on stdin and waits for it.
// An error only when the command could not be run at all.
Result<RunResult> Run(const std::vector<std::string>& argv, const std::string& input = "");

// Run, and a non-zero exit is an error "CMD failed: STDERR".
Result<std::string> RunChecked(const std::vector<std::string>& argv);

// `ip [-n NS] -force -batch -` (ns "" = the root namespace): -force keeps going
// after an error, so one stale object does not stop the rest. Returns the
// error lines; with check, a failed batch is an error.
Result<std::vector<std::string>> IpBatch(const std::string& ns, const std::vector<std::string>& lines, bool check);

// Several namespaces' batches at once (up to 16 `ip` processes together):
// the error lines of each, in order. Namespaces are independent, so this is
// IpBatch for each without waiting for one before starting the next.
struct NsBatch {
  std::string ns;
  std::vector<std::string> lines;
};
Result<std::vector<std::vector<std::string>>> IpBatches(const std::vector<NsBatch>& batches, bool check);

// Writes /proc/sys/... inside namespace ns.
Status SetSysctls(const std::string& ns, const Sysctls& values);
bool KernelHasSysctl(const std::string& name);

// Whether links of this kind ("dummy") can be made in namespace ns (tries one).
bool KernelHasLinkKind(const std::string& ns, const std::string& kind);

// Names from `ip netns list`.
std::vector<std::string> ListNetns();

// Processes in a namespace (`ip netns pids`).
std::vector<int> NetnsPids(const std::string& ns);

// Interface name -> carrier (LOWER_UP) in namespace ns; empty if it is gone.
std::map<std::string, bool> Carriers(const std::string& ns);

void SleepSeconds(double seconds);

// NETLINK_ROUTE sockets opened inside lab namespaces (a socket keeps the
// namespace it was made in) and kept open, so that setting a link admin up or
// down costs one message and its ack instead of starting `ip` (~tens of ms on
// a busy machine). Not thread-safe.
class NetnsRtnl {
 public:
  NetnsRtnl() = default;
  NetnsRtnl(const NetnsRtnl&) = delete;
  NetnsRtnl& operator=(const NetnsRtnl&) = delete;
  ~NetnsRtnl();

  // Opens the socket for namespace ns (once; later calls do nothing).
  Status Open(const std::string& ns);
  // Admin up or down of `ifname` in namespace ns (RTM_SETLINK by name), after
  // the kernel acknowledged it. Opens the socket if needed.
  Status SetAdmin(const std::string& ns, const std::string& ifname, bool up);

 private:
  std::map<std::string, int> fds_;  // namespace -> socket
  uint32_t seq_ = 0;
};

}  // namespace lockstep::netlab
