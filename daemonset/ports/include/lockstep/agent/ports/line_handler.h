// LineHandler: the port between a local line server (an adapter: a Unix
// socket, a pipe) and the service that answers it (a runtime piece, e.g.
// NcclEndpoint for the NCCL plugin's connections). The server reads
// newline-terminated lines from each client and calls OnLine with the line
// (without its newline); whatever OnLine returns is written back to that
// client. OnClose says a client is gone.
// Thread-safety: the server calls one handler from one thread at a time.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::agent {

using LineClient = uint64_t;  // unique per server for its lifetime

class LineHandler {
 public:
  virtual ~LineHandler() = default;
  virtual void OnOpen(LineClient client) = 0;
  // The reply, written to the client as is ("" for none).
  virtual std::string OnLine(LineClient client, const std::string& line) = 0;
  virtual void OnClose(LineClient client) = 0;
};

}  // namespace lockstep::agent
