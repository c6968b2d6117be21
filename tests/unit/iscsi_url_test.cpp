#include "initiator/iscsi_url.h"

#include <catch2/catch.hpp>

using namespace wanbackup;
using wanbackup::initiator::IscsiUrl;
using wanbackup::initiator::ParseIscsiUrl;

TEST_CASE("iscsi url: a full URL gives host and port and target and LUN", "[url]") {
  Result<IscsiUrl> u = ParseIscsiUrl("iscsi://10.0.0.5:3261/iqn.2001-05.com.example:disk/7");
  REQUIRE(u.ok());
  CHECK(u->host == "10.0.0.5");
  CHECK(u->port == 3261);
  CHECK(u->target == "iqn.2001-05.com.example:disk");
  CHECK(u->lun == 7);
  CHECK(u->Portal() == "10.0.0.5:3261");
}

TEST_CASE("iscsi url: port defaults to 3260 and target and LUN are optional", "[url]") {
  Result<IscsiUrl> portal = ParseIscsiUrl("iscsi://san.example.net");
  REQUIRE(portal.ok());
  CHECK(portal->port == 3260);
  CHECK(portal->target.empty());
  CHECK_FALSE(portal->lun.has_value());
  Result<IscsiUrl> target = ParseIscsiUrl("iscsi://san/iqn.2001-05.com.example:disk/");
  REQUIRE(target.ok());
  CHECK(target->target == "iqn.2001-05.com.example:disk");
  CHECK_FALSE(target->lun.has_value());
}

TEST_CASE("iscsi url: IPv6 addresses go in brackets", "[url]") {
  Result<IscsiUrl> u = ParseIscsiUrl("iscsi://[fd00::1]:3270/iqn.x:y/0");
  REQUIRE(u.ok());
  CHECK(u->host == "fd00::1");
  CHECK(u->Portal() == "[fd00::1]:3270");
}

TEST_CASE("iscsi url: user and secret are taken and the secret never shows", "[url]") {
  Result<IscsiUrl> u = ParseIscsiUrl("iscsi://alice%pa55@host/iqn.x:y/1");
  REQUIRE(u.ok());
  CHECK(u->user == "alice");
  CHECK(u->password.reveal() == "pa55");
  CHECK(u->ToDisplayString() == "iscsi://alice@host:3260/iqn.x:y/1");
}

TEST_CASE("iscsi url: malformed URLs get one-line errors that hide secrets", "[url]") {
  struct Case {
    const char* url;
    const char* says;
  };
  for (const Case& c :
       {Case{"http://host/iqn/1", "must start with iscsi://"},
        Case{"iscsi://host:99999/iqn/1", "port '99999'"}, Case{"iscsi://host:/iqn/1", "empty port"},
        Case{"iscsi:///iqn/1", "no host"}, Case{"iscsi://host/iqn/x", "LUN 'x'"},
        Case{"iscsi://host/iqn/1/2", "too many path parts"},
        Case{"iscsi://[::1/iqn/1", "unterminated"},
        Case{"iscsi://host/iqn/1?header_digest=crc32c", "query arguments"},
        Case{"iscsi://al%topsecret@host:0/iqn/1", "port '0'"}}) {
    INFO(c.url);
    Result<IscsiUrl> u = ParseIscsiUrl(c.url);
    REQUIRE_FALSE(u.ok());
    CHECK(u.status().code() == StatusCode::kInvalidArgument);
    CHECK(u.status().message().find(c.says) != std::string::npos);
    CHECK(u.status().message().find("topsecret") == std::string::npos);
    CHECK(u.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("ParseLunUrl: a data URL must name a LUN, and the error hides the secret", "[url]") {
  using wanbackup::initiator::ParseLunUrl;
  CHECK(ParseLunUrl("iscsi://host/iqn.2001-05.com.example:db/3").value().lun == 3);
  for (const char* url : {"iscsi://al%topsecret@host/iqn.2001-05.com.example:db", "iscsi://host"}) {
    INFO(url);
    Result<IscsiUrl> u = ParseLunUrl(url);
    REQUIRE_FALSE(u.ok());
    CHECK(u.status().message().find("names no LUN") != std::string::npos);
    CHECK(u.status().message().find("topsecret") == std::string::npos);
  }
  CHECK(ParseLunUrl("iscsi://host/iqn/x").status().message().find("LUN 'x'") != std::string::npos);
}
