#include <catch2/catch.hpp>

#include "lockstep/common/hash.h"

namespace lockstep {
namespace {

TEST_CASE("stable hashes are FNV-1a 64 and never change", "[common]") {
  // Published FNV-1a 64 test vectors: node ids on the wire and applied-object
  // hashes in annotations depend on these values staying the same.
  static_assert(Fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(Fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(Fnv1a64("foobar") == 0x85944171f73967e8ull);
  CHECK(StableHash("foobar") == "85944171f73967e8");
  CHECK(StableHash("") == "cbf29ce484222325");
}

}  // namespace
}  // namespace lockstep
