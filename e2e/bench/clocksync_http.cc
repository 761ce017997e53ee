#include "clocksync_http.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace lockstep::bench {
namespace {

void EnterNs(int fd) {
  if (::setns(fd, CLONE_NEWNET) != 0) throw std::runtime_error(std::string("setns: ") + std::strerror(errno));
}

size_t Collect(char* p, size_t s, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, s * n);
  return s * n;
}

// Hands curl a socket made beforehand (in another namespace); curl closes it.
curl_socket_t UseSocket(void* fd, curlsocktype, curl_sockaddr*) { return *static_cast<int*>(fd); }

// One request: a curl easy handle with its body, and the socket it uses.
struct Get {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl{curl_easy_init(), curl_easy_cleanup};
  std::string body;
  int fd = -1;
};

void Prepare(Get& g, const std::string& url, double timeout_s) {
  CURL* c = g.curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &g.body);
  if (g.fd >= 0) {
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, UseSocket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &g.fd);
  }
}

std::optional<std::string> BodyOf200(Get& g, CURLcode rc) {
  long status = 0;
  curl_easy_getinfo(g.curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK || status != 200) return std::nullopt;
  return std::move(g.body);
}

}  // namespace

Netns::Netns() {
  root_fd_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (root_fd_ < 0) throw std::runtime_error(std::string("/proc/self/ns/net: ") + std::strerror(errno));
}

Netns::~Netns() {
  Close();
  if (root_fd_ >= 0) ::close(root_fd_);
}

void Netns::Close() {
  for (auto& [ns, fd] : fds_) ::close(fd);
  fds_.clear();
}

int Netns::Fd(const std::string& ns) {
  auto it = fds_.find(ns);
  if (it != fds_.end()) return it->second;
  std::string path = "/run/netns/" + ns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  fds_[ns] = fd;
  return fd;
}

int Netns::Socket(const std::string& ns) {
  EnterNs(Fd(ns));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EnterNs(root_fd_);
  return fd;
}

std::map<std::string, std::optional<std::string>> GetMany(Netns& netns, const std::vector<std::string>& namespaces,
                                                           const std::string& path, int port, double timeout_s) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  std::vector<Get> gets(namespaces.size());
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(), curl_multi_cleanup);
  for (size_t k = 0; k < gets.size(); ++k) {
    gets[k].fd = netns.Socket(namespaces[k]);
    if (gets[k].fd < 0) continue;
    Prepare(gets[k], url, timeout_s);
    curl_multi_add_handle(multi.get(), gets[k].curl.get());
  }
  int running = 0;
  do {
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) break;
    if (running > 0) curl_multi_poll(multi.get(), nullptr, 0, 100, nullptr);
  } while (running > 0);
  std::map<std::string, CURLcode> done;
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi.get(), &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    for (size_t k = 0; k < gets.size(); ++k) {
      if (gets[k].curl.get() == m->easy_handle) done[namespaces[k]] = m->data.result;
    }
  }
  std::map<std::string, std::optional<std::string>> out;
  for (size_t k = 0; k < gets.size(); ++k) {
    auto it = done.find(namespaces[k]);
    out[namespaces[k]] = it == done.end() ? std::nullopt : BodyOf200(gets[k], it->second);
    if (gets[k].fd >= 0) curl_multi_remove_handle(multi.get(), gets[k].curl.get());
  }
  return out;
}

std::optional<std::string> HttpGet(const std::string& host_port, const std::string& path, double timeout_s) {
  Get g;
  Prepare(g, "http://" + host_port + path, timeout_s);
  return BodyOf200(g, curl_easy_perform(g.curl.get()));
}

}  // namespace lockstep::bench
