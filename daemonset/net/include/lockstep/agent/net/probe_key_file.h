// ProbeKeyFile: the shared probe key file (probeKeyFile; in Kubernetes a
// mounted Secret), reloaded when it changes. Kubelet updates a Secret volume by
// swapping a symlink, so the file is stat()ed (following links) on every
// Reload() and re-read only when its inode, size or mtime moved: one syscall per
// call, cheap enough for every turn of the agent's loop.
//
// A new key goes to PacketCodec::Rotate: the codec then signs with it and still
// accepts the previous key, so the agents of a cluster can pick up a rotated
// Secret minutes apart without losing a packet. A file that vanished, is being
// rewritten or holds an invalid key leaves the current key in place (the error
// is returned once per change so the caller can log it).
//
// Thread-compatible (one owner, e.g. the agent's main loop).
#pragma once

#include <string>

#include <sys/types.h>

#include "lockstep/agent/probe_packet.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

// A key file's content: the bytes without trailing newlines (`echo` adds one).
Result<ProbeKey> ParseProbeKeyFile(std::string text, const std::string& path);

class ProbeKeyFile {
 public:
  // Reads the key now. Errors: NotFound / InvalidArgument naming the file.
  static Result<ProbeKeyFile> Open(std::string path);

  const ProbeKey& key() const { return key_; }

  // If the file changed since the last look and holds a different valid key,
  // rotates `codec` to it and returns true; false if nothing changed.
  Result<bool> Reload(PacketCodec& codec);

 private:
  struct Stamp {
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  ProbeKeyFile(std::string path, ProbeKey key, Stamp stamp)
      : path_(std::move(path)), key_(std::move(key)), stamp_(stamp) {}
  static Result<Stamp> StampOf(const std::string& path);

  std::string path_;
  ProbeKey key_;
  Stamp stamp_;
};

}  // namespace lockstep::agent
