#include "common/status.h"

#include <cerrno>

#include <catch2/catch.hpp>

#include "common/result.h"

using namespace wanbackup;

namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  WB_ASSIGN_OR_RETURN(int half, Half(x));
  WB_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

}  // namespace

TEST_CASE("status: OK is the default and carries no message", "[status]") {
  Status s;
  CHECK(s.ok());
  CHECK(s.ToString() == "OK");
  CHECK(Status(StatusCode::kOk, "ignored").message().empty());
}

TEST_CASE("status: context is prepended and the code kept", "[status]") {
  Status s = Status::NotFound("no such LUN").WithContext("probe");
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(s.message() == "probe: no such LUN");
  CHECK(Status::Ok().WithContext("x").ok());
}

TEST_CASE("status: errno values map to failure kinds", "[status]") {
  CHECK(Status::FromErrno(ENOENT, "open f").code() == StatusCode::kNotFound);
  CHECK(Status::FromErrno(ECONNREFUSED, "connect").code() == StatusCode::kUnavailable);
  CHECK(Status::FromErrno(EACCES, "open").code() == StatusCode::kPermissionDenied);
  CHECK(Status::FromErrno(EIO, "read").code() == StatusCode::kIoError);
  CHECK(Status::FromErrno(ENOENT, "open f").message().find("open f: ") == 0);
}

TEST_CASE("result: values pass through and failures return early", "[status]") {
  CHECK(Quarter(12).value() == 3);
  Result<int> r = Quarter(6);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "3 is odd");
}
