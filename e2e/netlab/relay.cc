// netlab-relay: lets processes in network namespaces reach a TCP service on
// the root namespace's loopback, with no new interface, address or route.
//
//   netlab-relay --to 127.0.0.1:6443 --listen lab-h0=127.0.0.1:6443 --listen lab-h1=127.0.0.1:6443
//
// For each --listen NETNS=ADDR:PORT it opens a listening socket *inside*
// network namespace NETNS (/run/netns/NETNS, as `ip netns add` makes it; the
// socket keeps that namespace), and forwards every connection accepted there
// to --to, connected from the namespace the relay was started in. So a
// process in NETNS that dials 127.0.0.1:6443 talks to the root namespace's
// 127.0.0.1:6443 (the hermetic kube-apiserver, whose certificate names
// IP:127.0.0.1, so TLS verifies unchanged). Bytes are copied as they are
// (TLS stays end to end); each direction's EOF is passed on with a
// half-close. Nothing listens outside the namespaces named, and the only
// outbound connections go to --to.
//
// Runs until SIGTERM/SIGINT. Prints "ready" on stdout once every listener is
// open. A test tool (needs root for setns); one thread per connection and
// direction is plenty for the handful of agents a test runs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

struct HostPort {
  std::string host;
  int port = 0;
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "netlab-relay: %s\n", msg.c_str());
  std::exit(2);
}

HostPort ParseHostPort(const std::string& text, const std::string& what) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) Die(what + " must be IPv4:PORT (got \"" + text + "\")");
  HostPort hp{text.substr(0, colon), std::atoi(text.substr(colon + 1).c_str())};
  in_addr a{};
  if (::inet_pton(AF_INET, hp.host.c_str(), &a) != 1 || hp.port <= 0 || hp.port > 65535) {
    Die(what + " must be IPv4:PORT with port 1-65535 (got \"" + text + "\")");
  }
  return hp;
}

sockaddr_in ToSockaddr(const HostPort& hp) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(hp.port));
  ::inet_pton(AF_INET, hp.host.c_str(), &sa.sin_addr);
  return sa;
}

// Copies from `from` to `to` until EOF or an error; then half-closes `to`
// (EOF) or, on an error, shuts both down so the other direction ends too.
void Pump(int from, int to) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) {
        ::shutdown(to, SHUT_WR);
      } else {
        ::shutdown(from, SHUT_RDWR);
        ::shutdown(to, SHUT_RDWR);
      }
      return;
    }
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ::shutdown(from, SHUT_RDWR);
        ::shutdown(to, SHUT_RDWR);
        return;
      }
      off += w;
    }
  }
}

void Serve(int client, sockaddr_in to) {
  int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    std::fprintf(stderr, "netlab-relay: cannot connect upstream: %s\n", std::strerror(errno));
    if (up >= 0) ::close(up);
    ::close(client);
    return;
  }
  int one = 1;
  ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::thread back([client, up] { Pump(up, client); });
  Pump(client, up);
  back.join();
  ::close(up);
  ::close(client);
}

// A listening socket on `at` inside network namespace `netns`; the calling
// thread returns to `home` (the relay's own namespace) before returning.
int ListenIn(const std::string& netns, const HostPort& at, int home) {
  const std::string path = "/run/netns/" + netns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("cannot open network namespace " + path + ": " + std::strerror(errno));
  if (::setns(fd, CLONE_NEWNET) != 0) Die("setns " + path + ": " + std::strerror(errno) + " (needs root)");
  ::close(fd);
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = ToSockaddr(at);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(s, 64) != 0) {
    Die("cannot listen on " + at.host + ":" + std::to_string(at.port) + " in " + netns + ": " +
        std::strerror(errno) + " (is the loopback up there?)");
  }
  if (::setns(home, CLONE_NEWNET) != 0) Die(std::string("setns back: ") + std::strerror(errno));
  return s;
}

std::atomic<bool> g_stop{false};

}  // namespace

int main(int argc, char** argv) {
  std::string to_text;
  std::vector<std::string> listen_texts;
  CLI::App app{"netlab-relay: lets processes in network namespaces reach a TCP service on the root namespace's "
               "loopback (see the comment at the top of relay.cc). Prints \"ready\" once every listener is open; "
               "runs until SIGTERM/SIGINT.",
               "netlab-relay"};
  app.add_option("--to", to_text, "IPv4:PORT to forward to, dialled from the relay's own namespace")->required();
  app.add_option("--listen", listen_texts, "NETNS=IPv4:PORT: a listener inside /run/netns/NETNS; repeatable")
      ->required()
      ->allow_extra_args(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const HostPort to = ParseHostPort(to_text, "--to");
  std::vector<std::pair<std::string, HostPort>> listens;
  for (const auto& v : listen_texts) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) Die("--listen must be NETNS=IPv4:PORT (got \"" + v + "\")");
    listens.emplace_back(v.substr(0, eq), ParseHostPort(v.substr(eq + 1), "--listen " + v));
  }
  int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) Die(std::string("cannot open /proc/self/ns/net: ") + std::strerror(errno));
  std::vector<int> listeners;
  for (const auto& [netns, at] : listens) listeners.push_back(ListenIn(netns, at, home));

  // SIGTERM/SIGINT are blocked in every thread and taken by sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const sockaddr_in target = ToSockaddr(to);
  std::vector<std::thread> acceptors;
  for (int l : listeners) {
    acceptors.emplace_back([l, target] {
      while (!g_stop) {
        int c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;  // EINTR, a client gone before accept, or shut down (g_stop)
        std::thread(Serve, c, target).detach();
      }
    });
  }
  std::printf("ready\n");
  std::fflush(stdout);
  int sig = 0;
  ::sigwait(&stop_signals, &sig);
  g_stop = true;
  // Unblock the acceptors (shutdown on a listening socket makes accept fail).
  for (int l : listeners) ::shutdown(l, SHUT_RDWR);
  for (auto& t : acceptors) t.join();
  return 0;
}
