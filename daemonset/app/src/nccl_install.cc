#include "lockstep/agent/app/nccl_install.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::agent {
namespace {

std::string Errno() { return std::strerror(errno); }

// Reads a whole file; at most 256 MiB (the plugin is about 1 MiB).
Result<std::string> ReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open " + path + ": " + Errno());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file");
  }
  constexpr off_t kMax = off_t{256} << 20;
  if (st.st_size > kMax) {
    ::close(fd);
    return InvalidArgument(path + " is larger than 256 MiB");
  }
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string e = Errno();
      ::close(fd);
      return Internal("cannot read " + path + ": " + e);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (static_cast<off_t>(data.size()) > kMax) {
      ::close(fd);
      return InvalidArgument(path + " is larger than 256 MiB");
    }
  }
  ::close(fd);
  return data;
}

Status WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(Errno());
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<NcclInstallOutcome> InstallNcclPlugin(const std::string& source, const std::string& dir) {
  auto data = ReadAll(source);
  if (!data.ok()) return data.error();
  if (data->empty()) return InvalidArgument(source + " is empty");
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) return NotFound("cannot use directory " + dir + ": " + Errno());
  if (!S_ISDIR(dst.st_mode)) return InvalidArgument(dir + " is not a directory");
  NcclInstallOutcome out;
  out.destination = dir + "/" + kNcclPluginFileName;
  out.bytes = data->size();
  if (auto existing = ReadAll(out.destination); existing.ok() && *existing == *data) {
    struct stat st {};
    if (::stat(out.destination.c_str(), &st) == 0 && (st.st_mode & 07777) == 0644) {
      out.unchanged = true;
      return out;
    }
  }
  const std::string tmp = dir + "/." + kNcclPluginFileName + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Internal("cannot create " + tmp + ": " + Errno());
  Status s = WriteAll(fd, *data);
  if (s.ok() && ::fchmod(fd, 0644) != 0) s = Internal("chmod: " + Errno());
  if (s.ok() && ::fsync(fd) != 0) s = Internal("fsync: " + Errno());
  if (::close(fd) != 0 && s.ok()) s = Internal("close: " + Errno());
  if (s.ok() && ::rename(tmp.c_str(), out.destination.c_str()) != 0) s = Internal("rename: " + Errno());
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return Internal("cannot write " + out.destination + ": " + s.error().message);
  }
  // The rename itself is durable once the directory is synced.
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return out;
}

int InstallNcclPluginMain(const std::vector<std::string>& args) {
  constexpr const char* kUsage =
      "usage: lockstep-agent install-nccl-plugin [--from FILE] --to DIR\n"
      "  copies the NCCL network plugin (default FILE: /usr/local/lib/lockstep/libnccl-net-lockstep.so)\n"
      "  to DIR/libnccl-net-lockstep.so, atomically; training pods put DIR on LD_LIBRARY_PATH and set\n"
      "  NCCL_NET_PLUGIN=lockstep NCCL_NET=Lockstep\n";
  std::string from = kNcclPluginImagePath, to;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag, std::string& out) {
      if (a == flag && i + 1 < args.size()) {
        out = args[++i];
        return true;
      }
      if (a.rfind(flag + "=", 0) == 0) {
        out = a.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (value("--from", from) || value("--to", to)) continue;
    std::fprintf(stderr, "lockstep-agent install-nccl-plugin: unknown argument \"%s\"\n%s", a.c_str(), kUsage);
    return 2;
  }
  if (to.empty() || from.empty()) {
    std::fprintf(stderr, "lockstep-agent install-nccl-plugin: --to DIR is required\n%s", kUsage);
    return 2;
  }
  auto r = InstallNcclPlugin(from, to);
  if (!r.ok()) {
    std::fprintf(stderr, "lockstep-agent install-nccl-plugin: %s\n", r.error().message.c_str());
    return 1;
  }
  std::printf("lockstep-agent install-nccl-plugin: %s %s (%zu bytes, from %s)\n",
              r->unchanged ? "up to date:" : "installed", r->destination.c_str(), r->bytes, from.c_str());
  return 0;
}

}  // namespace lockstep::agent
