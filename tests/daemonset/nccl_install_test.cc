#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

#include "lockstep/agent/app/nccl_install.h"

namespace lockstep::agent {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "nccl-install-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void Write(const fs::path& p, const std::string& data) { std::ofstream(p, std::ios::binary) << data; }

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ino_t Inode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

TEST_CASE("install-nccl-plugin copies the plugin into the directory, 0644, by rename", "[nccl_install]") {
  TempDir t;
  const fs::path src = t.path / "src.so", dir = t.path / "host";
  fs::create_directory(dir);
  const std::string bytes = std::string(
                                "\x7f"
                                "ELF",
                                4) +
                            std::string(200000, 'x') + std::string(1, '\0') + "end";
  Write(src, bytes);
  ::chmod(src.c_str(), 0600);  // the copy's mode is its own

  auto r = InstallNcclPlugin(src, dir);
  REQUIRE(r.ok());
  const fs::path dest = dir / "libnccl-net-lockstep.so";
  REQUIRE(r->destination == dest.string());
  REQUIRE(r->bytes == bytes.size());
  REQUIRE_FALSE(r->unchanged);
  REQUIRE(Read(dest) == bytes);
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  REQUIRE((st.st_mode & 07777) == 0644);
  // Nothing else left in the directory (the temporary file was renamed).
  REQUIRE(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);

  // Same bytes again: left alone (same inode).
  const ino_t before = Inode(dest);
  auto again = InstallNcclPlugin(src, dir);
  REQUIRE(again.ok());
  REQUIRE(again->unchanged);
  REQUIRE(Inode(dest) == before);

  // A new plugin replaces the file by rename: a process holding the old one
  // open (as a training process has it mapped) still reads the old bytes.
  std::ifstream held(dest, std::ios::binary);
  Write(src, "new plugin");
  auto updated = InstallNcclPlugin(src, dir);
  REQUIRE(updated.ok());
  REQUIRE_FALSE(updated->unchanged);
  REQUIRE(Read(dest) == "new plugin");
  REQUIRE(Inode(dest) != before);
  std::string old_bytes{std::istreambuf_iterator<char>(held), std::istreambuf_iterator<char>()};
  REQUIRE(old_bytes == bytes);

  // Right bytes, wrong mode: rewritten with 0644.
  ::chmod(dest.c_str(), 0600);
  auto fixed = InstallNcclPlugin(src, dir);
  REQUIRE(fixed.ok());
  REQUIRE_FALSE(fixed->unchanged);
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  REQUIRE((st.st_mode & 07777) == 0644);
}

TEST_CASE("install-nccl-plugin fails plainly and leaves nothing behind", "[nccl_install]") {
  TempDir t;
  const fs::path src = t.path / "src.so", dir = t.path / "host";
  fs::create_directory(dir);

  auto missing = InstallNcclPlugin((t.path / "nope.so").string(), dir);
  REQUIRE_FALSE(missing.ok());
  REQUIRE(missing.error().message.find("nope.so") != std::string::npos);
  REQUIRE(missing.error().message.find("No such file") != std::string::npos);

  Write(src, "");
  auto empty = InstallNcclPlugin(src, dir);
  REQUIRE_FALSE(empty.ok());
  REQUIRE(empty.error().message.find("is empty") != std::string::npos);

  Write(src, "plugin");
  auto no_dir = InstallNcclPlugin(src, (t.path / "absent").string());
  REQUIRE_FALSE(no_dir.ok());
  REQUIRE(no_dir.error().message.find("absent") != std::string::npos);

  auto a_file = InstallNcclPlugin(src, src);
  REQUIRE_FALSE(a_file.ok());
  REQUIRE(a_file.error().message.find("not a directory") != std::string::npos);

  auto dir_as_source = InstallNcclPlugin(dir, dir);
  REQUIRE_FALSE(dir_as_source.ok());
  REQUIRE(dir_as_source.error().message.find("not a regular file") != std::string::npos);

  if (::geteuid() != 0) {  // root writes anywhere
    ::chmod(dir.c_str(), 0555);
    auto ro = InstallNcclPlugin(src, dir);
    ::chmod(dir.c_str(), 0755);
    REQUIRE_FALSE(ro.ok());
    REQUIRE(ro.error().message.find("Permission denied") != std::string::npos);
  }
  REQUIRE(fs::is_empty(dir));
}

TEST_CASE("install-nccl-plugin's command line", "[nccl_install]") {
  TempDir t;
  const fs::path src = t.path / "src.so", dir = t.path / "host";
  fs::create_directory(dir);
  Write(src, "plugin bytes");
  REQUIRE(InstallNcclPluginMain({"--from", src.string(), "--to=" + dir.string()}) == 0);
  REQUIRE(Read(dir / "libnccl-net-lockstep.so") == "plugin bytes");
  REQUIRE(InstallNcclPluginMain({"--from=" + src.string(), "--to", dir.string()}) == 0);
  REQUIRE(InstallNcclPluginMain({"--help"}) == 0);
  REQUIRE(InstallNcclPluginMain({}) == 2);                             // --to is required
  REQUIRE(InstallNcclPluginMain({"--to", dir.string(), "--x"}) == 2);  // unknown argument
  REQUIRE(InstallNcclPluginMain({"--to"}) == 2);                       // flag without its value
  // The default source is the image's path, absent here: a runtime failure.
  if (!fs::exists(kNcclPluginImagePath)) REQUIRE(InstallNcclPluginMain({"--to", dir.string()}) == 1);
}

}  // namespace
}  // namespace lockstep::agent
