#include <catch2/catch.hpp>

#include "lockstep/common/result.h"

namespace lockstep {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("x must be even (got " + std::to_string(x) + ")");
  return x / 2;
}

TEST_CASE("Result carries a value or an error", "[common]") {
  auto ok = Half(4);
  REQUIRE(ok.ok());
  REQUIRE(*ok == 2);
  auto bad = Half(3);
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.code() == ErrorCode::kInvalidArgument);
  REQUIRE(bad.error().ToString() == "InvalidArgument: x must be even (got 3)");
}

TEST_CASE("Status converts from a Result", "[common]") {
  REQUIRE(Status::FromResult(Half(2)).ok());
  Status s = Status::FromResult(Half(1));
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
