// HTTP GETs to agents on loopback, inside network namespaces: sockets are
// opened in a namespace through setns() (this thread only) and then used from
// the root namespace, so every agent can be asked in one burst.
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

  // A TCP socket connected to 127.0.0.1:port inside namespace `ns`, or -1.
  int Connect(const std::string& ns, int port, double timeout_s = 2.0);
  void Close();

 private:
  int Fd(const std::string& ns);
  int root_fd_ = -1;
  std::map<std::string, int> fds_;
};

// A TCP socket connected to host:port ("127.0.0.1:9611") in our namespace, or -1.
int ConnectTcp(const std::string& host_port, double timeout_s = 2.0);

// Sends a GET on a connected socket; false on error.
bool SendGet(int fd, const std::string& path);
// Reads the response to EOF and closes fd. The body of a 200, else nullopt.
std::optional<std::string> ReadBody(int fd);

// GETs path from every namespace in one burst: connect all, send all requests
// back to back, then read. ns -> body (nullopt: no answer or not 200).
std::map<std::string, std::optional<std::string>> GetMany(Netns& netns, const std::vector<std::string>& namespaces,
                                                           const std::string& path, int port);

// One GET in our namespace.
std::optional<std::string> HttpGet(const std::string& host_port, const std::string& path, double timeout_s = 5.0);

}  // namespace lockstep::bench
