#include "initiator/connection_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace wanbackup;
using wanbackup::initiator::CheckCongestionControl;
using wanbackup::initiator::SetCongestionControl;

TEST_CASE("congestion control: a socket takes the one asked for, read back from the kernel",
          "[connection]") {
  // reno is built into every Linux kernel and always allowed.
  CHECK(CheckCongestionControl("reno").ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  CHECK(SetCongestionControl(fd, "reno").ok());
  char name[16] = {};
  socklen_t len = sizeof name;
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0);
  CHECK(std::string(name) == "reno");
  ::close(fd);
}

TEST_CASE("congestion control: an unknown or malformed name is one line naming what there is",
          "[connection]") {
  const Status unknown = CheckCongestionControl("nosuchcc");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.code() == StatusCode::kInvalidArgument);
  CHECK(unknown.message().find("'nosuchcc' is not available on this host") != std::string::npos);
  CHECK(unknown.message().find("reno") != std::string::npos);  // the host's list
  CHECK(unknown.message().find('\n') == std::string::npos);
  for (const char* bad : {"", "a-name-far-too-long"}) {
    INFO(bad);
    const Status s = CheckCongestionControl(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("1 to 15 characters") != std::string::npos);
  }
}
