// HTTP GETs (libcurl) to agents on loopback, inside network namespaces: each
// socket is created in its agent's namespace through setns() (this thread
// only) and handed to curl, which connects and talks from the root namespace,
// so every agent can be asked in one burst. Not thread-safe (setns switches
// the calling thread's namespace while a socket is made).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::bench {

// Open handles of /run/netns/NAME, and a way back to our own namespace.
class Netns {
 public:
  Netns();
  ~Netns();
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;

  // An unconnected TCP socket that lives in namespace `ns`, or -1. The
  // caller owns it.
  int Socket(const std::string& ns);
  void Close();

 private:
  int Fd(const std::string& ns);
  int root_fd_ = -1;
  std::map<std::string, int> fds_;
};

// GETs path from 127.0.0.1:port in every namespace in one burst (all requests
// run concurrently). ns -> body (nullopt: no answer within timeout_s, or not 200).
std::map<std::string, std::optional<std::string>> GetMany(Netns& netns, const std::vector<std::string>& namespaces,
                                                           const std::string& path, int port,
                                                           double timeout_s = 2.0);

// One GET in our namespace; host_port as "127.0.0.1:9611". The body of a 200,
// else nullopt.
std::optional<std::string> HttpGet(const std::string& host_port, const std::string& path, double timeout_s = 5.0);

}  // namespace lockstep::bench
