// SockDiagTraffic against the kernel: a loopback TCP connection shows up
// with its remote address and the bytes it moved.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "lockstep/agent/net/sock_diag_traffic.h"

namespace lockstep::agent {
namespace {

TEST_CASE("sock_diag lists an established loopback connection and the bytes it moved", "[daemonset][tiers]") {
  auto source = SockDiagTraffic::Open();
  REQUIRE(source.ok());
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const int server = ::accept(listener, nullptr, nullptr);
  REQUIRE(server >= 0);
  sockaddr_in local{};
  len = sizeof(local);
  REQUIRE(::getsockname(client, reinterpret_cast<sockaddr*>(&local), &len) == 0);

  auto bytes_of_client = [&]() -> std::optional<uint64_t> {
    auto flows = (*source)->Flows();
    REQUIRE(flows.ok());
    // The client's socket: remote 127.0.0.1 at the listener's port (the
    // machine may have other loopback connections).
    std::optional<uint64_t> bytes;
    for (const TcpFlow& f : *flows) {
      if (f.remote == INADDR_LOOPBACK && f.remote_port == ntohs(addr.sin_port)) bytes = f.bytes;
    }
    return bytes;
  };
  auto before = bytes_of_client();
  REQUIRE(before);  // listed, established
  char buf[4096] = {};
  REQUIRE(::send(client, buf, sizeof(buf), 0) == static_cast<ssize_t>(sizeof(buf)));
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t n = ::recv(server, buf, sizeof(buf), 0);
    REQUIRE(n > 0);
    got += static_cast<size_t>(n);
  }
  auto after = bytes_of_client();
  REQUIRE(after);
  CHECK(*after >= *before + sizeof(buf));
  ::close(server);
  ::close(client);
  ::close(listener);
}

}  // namespace
}  // namespace lockstep::agent
