#include "lockstep/agent/net/probe_key_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lockstep::agent {
namespace {

Result<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read probe key file " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<ProbeKey> ParseProbeKeyFile(std::string text, const std::string& path) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  auto key = ProbeKey::FromBytes(std::move(text));
  if (!key.ok()) return InvalidArgument(path + ": " + key.error().message);
  return key;
}

Result<ProbeKeyFile::Stamp> ProbeKeyFile::StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return NotFound("cannot stat probe key file " + path + ": " + std::strerror(errno));
  return Stamp{st.st_ino, st.st_size, static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

Result<ProbeKeyFile> ProbeKeyFile::Open(std::string path) {
  auto stamp = StampOf(path);
  if (!stamp.ok()) return stamp.error();
  auto text = Slurp(path);
  if (!text.ok()) return text.error();
  auto key = ParseProbeKeyFile(std::move(*text), path);
  if (!key.ok()) return key.error();
  return ProbeKeyFile(std::move(path), std::move(*key), *stamp);
}

Result<bool> ProbeKeyFile::Reload(PacketCodec& codec) {
  auto stamp = StampOf(path_);
  if (!stamp.ok() || *stamp == stamp_) {
    // Gone for a moment (the symlink swap) or unchanged: keep the key. Report
    // a vanished file once, then stay quiet until it changes again.
    if (!stamp.ok() && stamp_.size >= 0) {
      stamp_ = Stamp{};
      return stamp.error();
    }
    return false;
  }
  stamp_ = *stamp;
  auto text = Slurp(path_);
  if (!text.ok()) return text.error();
  auto key = ParseProbeKeyFile(std::move(*text), path_);
  if (!key.ok()) return key.error();
  if (key->bytes() == key_.bytes()) return false;
  key_ = std::move(*key);
  codec.Rotate(key_);
  return true;
}

}  // namespace lockstep::agent
