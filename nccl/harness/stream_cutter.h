// Fault injection from outside the plugin: finds this process's established
// TCP sockets (the plugin's streams) through /proc/self/fd and shuts one down,
// as a link or NIC failure would end it. The plugin owns the descriptor and
// closes it itself when it notices; the cutter only calls shutdown(2), so no
// descriptor is closed behind the plugin's back. Header-only.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace lockstep::nccl::harness {

struct TcpSocket {
  int fd = -1;
  uint16_t local_port = 0;
  uint16_t peer_port = 0;
};

inline std::vector<TcpSocket> EstablishedTcpSockets() {
  std::vector<TcpSocket> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, listening = 0;
    socklen_t len = sizeof type;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof listening;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening) continue;
    sockaddr_in local{}, peer{};
    socklen_t l1 = sizeof local, l2 = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &l1) != 0 || local.sin_family != AF_INET)
      continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &l2) != 0) continue;  // not connected
    out.push_back(
        TcpSocket{.fd = static_cast<int>(fd), .local_port = ntohs(local.sin_port), .peer_port = ntohs(peer.sin_port)});
  }
  closedir(d);
  return out;
}

// Ends the stream as a failed link would (both directions).
inline bool CutStream(const TcpSocket& s) { return shutdown(s.fd, SHUT_RDWR) == 0; }

}  // namespace lockstep::nccl::harness
