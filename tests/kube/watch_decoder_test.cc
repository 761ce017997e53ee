#include <catch2/catch.hpp>

#include "http_status.h"
#include "watch_decoder.h"

namespace lockstep::kube::internal {
namespace {

const std::string kStream =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
    "\n\n"
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})"
    "\r\n"
    R"J({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"}})J"
    "\n";

TEST_CASE("watch decoder reassembles lines split at every byte", "[kube][watch]") {
  WatchDecoder d;
  std::vector<std::string> lines;
  for (char c : kStream) REQUIRE(d.Feed(std::string_view(&c, 1), lines).ok());
  REQUIRE(lines.size() == 3);
  auto added = ParseWatchEvent(lines[0]);
  REQUIRE(added.ok());
  CHECK(added->type == "ADDED");
  CHECK(added->object["metadata"]["name"] == "a");
  auto bookmark = ParseWatchEvent(lines[1]);  // the trailing \r is whitespace to JSON
  REQUIRE(bookmark.ok());
  CHECK(bookmark->type == "BOOKMARK");
  auto err = ParseWatchEvent(lines[2]);
  REQUIRE(err.ok());
  Error e = WatchErrorEvent(*err);
  CHECK(e.code == ErrorCode::kGone);
  CHECK_THAT(e.message, Catch::Contains("too old resource version"));
  std::string rest;
  CHECK_FALSE(d.Finish(rest));
}

TEST_CASE("watch decoder keeps an unterminated final line for Finish", "[kube][watch]") {
  WatchDecoder d;
  std::vector<std::string> lines;
  REQUIRE(d.Feed(R"({"type":"ADDED","obj)", lines).ok());
  REQUIRE(d.Feed(R"(ect":{}})", lines).ok());
  CHECK(lines.empty());
  std::string last;
  REQUIRE(d.Finish(last));
  CHECK(ParseWatchEvent(last).ok());
}

TEST_CASE("watch decoder rejects oversized and malformed events", "[kube][watch]") {
  WatchDecoder d(16);
  std::vector<std::string> lines;
  CHECK_FALSE(d.Feed(std::string(32, 'x'), lines).ok());
  CHECK(ParseWatchEvent("{not json").code() == ErrorCode::kInternal);
  CHECK(ParseWatchEvent(R"({"type":"ADDED"})").code() == ErrorCode::kInternal);
  WatchEvent other{"ERROR", {{"code", 500}, {"message", "etcd down"}}};
  CHECK(WatchErrorEvent(other).code == ErrorCode::kUnavailable);
}

TEST_CASE("HTTP status mapping", "[kube][watch]") {
  auto status = [](int code, const char* reason, const char* msg) {
    return nlohmann::json{{"kind", "Status"}, {"code", code}, {"reason", reason}, {"message", msg}}.dump();
  };
  CHECK(MapHttpError(404, status(404, "NotFound", "pods \"x\" not found"), "get").code == ErrorCode::kNotFound);
  CHECK(MapHttpError(409, status(409, "AlreadyExists", "exists"), "create").code == ErrorCode::kAlreadyExists);
  CHECK(MapHttpError(409, status(409, "Conflict", "modified"), "update").code == ErrorCode::kConflict);
  CHECK(MapHttpError(410, "", "watch").code == ErrorCode::kGone);
  CHECK(MapHttpError(401, "", "get").code == ErrorCode::kUnauthorized);
  CHECK(MapHttpError(403, "", "get").code == ErrorCode::kUnauthorized);
  CHECK(MapHttpError(400, "", "get").code == ErrorCode::kInvalidArgument);
  CHECK(MapHttpError(429, "", "get").code == ErrorCode::kUnavailable);
  CHECK(MapHttpError(503, "", "get").code == ErrorCode::kUnavailable);
  Error e = MapHttpError(422, status(422, "Invalid", "spec.x: Invalid value: 0"), "apply fabricpolicies \"d\"");
  CHECK(e.code == ErrorCode::kInvalidArgument);
  CHECK(e.message == "apply fabricpolicies \"d\": HTTP 422 Invalid: spec.x: Invalid value: 0");
  CHECK(MapHttpError(502, "<html>bad gateway</html>\n", "get").message == "get: HTTP 502: <html>bad gateway</html>");
}

}  // namespace
}  // namespace lockstep::kube::internal
