// UnixLineServer: a local line server on a Unix stream socket (an adapter on
// the LineHandler port), e.g. /run/lockstep/nccl.sock for the NCCL plugin.
//
// One thread polls the listening socket and every client; each complete line
// goes to the handler and its reply is queued for that client. Nothing a
// client does can stall the others or the agent: sockets are non-blocking, a
// client whose line grows past max_line or whose unread replies pass
// max_buffered is dropped, and at most max_clients are served (more are
// closed at once). Start() removes a stale socket file left by a previous
// run, creates the parent directory, and makes the socket world-writable
// (0666): training pods run under other users and reach it through a
// hostPath.
// Thread-safety: Start/Stop from the owner; the handler runs on the server's
// thread only.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "lockstep/agent/ports/line_handler.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

struct UnixLineServerOptions {
  size_t max_clients = 256;
  size_t max_line = 4096;
  size_t max_buffered = 1 << 20;
};

class UnixLineServer {
 public:
  UnixLineServer(std::string path, LineHandler& handler, UnixLineServerOptions options = {});
  ~UnixLineServer();  // Stop()
  UnixLineServer(const UnixLineServer&) = delete;
  UnixLineServer& operator=(const UnixLineServer&) = delete;

  // Binds and starts the thread. Errors (Unavailable) say which path and why.
  Status Start();
  // Stops the thread, closes every client and removes the socket file.
  void Stop();
  const std::string& path() const { return path_; }

 private:
  void Run();

  std::string path_;
  LineHandler& handler_;
  UnixLineServerOptions o_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: Stop() wakes the poll
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace lockstep::agent
