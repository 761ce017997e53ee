// `lockstep-agent fabric status`: queries a running agent's GET /fabric.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "lockstep/agent/app/fabric_status_text.h"
#include "lockstep/agent/net/http_get.h"

namespace lockstep::agent {

int FabricStatusCommand(const CommandLine& cl) {
  auto addr = ParseHostPort(cl.status_addr, "--addr");
  if (!addr.ok()) {
    std::fprintf(stderr, "lockstep-agent: %s\n", addr.error().message.c_str());
    return kExitUsage;
  }
  auto reply = HttpGet(addr->host, addr->port, "/fabric");
  if (!reply.ok()) {
    std::fprintf(stderr, "lockstep-agent fabric status: %s\n", reply.error().message.c_str());
    return kExitFailure;
  }
  if (reply->status != 200) {
    std::fprintf(stderr, "lockstep-agent fabric status: %s answered HTTP %d: %s", cl.status_addr.c_str(),
                 reply->status, reply->body.c_str());
    return kExitFailure;
  }
  nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    std::fprintf(stderr, "lockstep-agent fabric status: %s did not answer JSON\n", cl.status_addr.c_str());
    return kExitFailure;
  }
  if (cl.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(FormatFabricStatus(j).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace lockstep::agent
