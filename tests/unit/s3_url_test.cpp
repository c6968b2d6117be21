#include "store/s3_url.h"

#include <catch2/catch.hpp>

using namespace wanbackup;
using wanbackup::pipeline::IsS3Url;
using wanbackup::pipeline::ParseS3Url;
using wanbackup::pipeline::S3Location;

TEST_CASE("s3 url: host, port, bucket and prefix of an http URL", "[s3][url]") {
  Result<S3Location> u = ParseS3Url("s3:http://198.18.0.2:7480/backups/site-a/db1");
  REQUIRE(u.ok());
  CHECK_FALSE(u->https);
  CHECK(u->host == "198.18.0.2");
  CHECK(u->port == 7480);
  CHECK(u->bucket == "backups");
  CHECK(u->prefix == "site-a/db1");
  CHECK(u->Endpoint() == "http://198.18.0.2:7480");
  CHECK(u->Key("config") == "site-a/db1/config");
  CHECK(u->ToString() == "s3:http://198.18.0.2:7480/backups/site-a/db1");
}

TEST_CASE("s3 url: https defaults to port 443 and http to 80, and the prefix is optional",
          "[s3][url]") {
  Result<S3Location> s = ParseS3Url("s3:https://s3.example.net/bucket");
  REQUIRE(s.ok());
  CHECK(s->https);
  CHECK(s->port == 443);
  CHECK(s->prefix.empty());
  CHECK(s->Key("config") == "config");
  Result<S3Location> h = ParseS3Url("s3:http://rgw/bucket/");
  REQUIRE(h.ok());
  CHECK(h->port == 80);
  CHECK(h->prefix.empty());
}

TEST_CASE("s3 url: an IPv6 host is written in brackets", "[s3][url]") {
  Result<S3Location> u = ParseS3Url("s3:http://[fd00::2]:7480/bucket/p");
  REQUIRE(u.ok());
  CHECK(u->host == "fd00::2");
  CHECK(u->Endpoint() == "http://[fd00::2]:7480");
}

TEST_CASE("s3 url: malformed URLs are refused with the reason", "[s3][url]") {
  const char* bad[] = {
      "s3:ftp://host/bucket",         // scheme
      "s3:http:///bucket",            // no host
      "s3:http://host",               // no bucket
      "s3:http://host/",              // no bucket
      "s3:http://host:0/bucket",      // port
      "s3:http://host:99999/bucket",  // port
      "s3:http://host:/bucket",       // empty port
      "s3:http://host/Bucket",        // upper case bucket
      "s3:http://host/ab",            // too short
      "s3:http://host/bucket/a//b",   // empty segment
      "s3:http://host/bucket/../x",   // dot-dot
      "s3:http://host/bucket/a b",    // space
      "s3:http://host/bucket?x=1",    // query
      "http://host/bucket",           // no s3:
  };
  for (const char* url : bad) {
    INFO(url);
    Result<S3Location> u = ParseS3Url(url);
    REQUIRE_FALSE(u.ok());
    CHECK(u.status().code() == StatusCode::kInvalidArgument);
    CHECK(u.status().message().find("bad S3 URL") != std::string::npos);
  }
}

TEST_CASE("s3 url: credentials in the URL are refused and not repeated", "[s3][url]") {
  Result<S3Location> u = ParseS3Url("s3:http://key:hunter2@host/bucket");
  REQUIRE_FALSE(u.ok());
  CHECK(u.status().message().find("AWS_ACCESS_KEY_ID") != std::string::npos);
  CHECK(u.status().message().find("hunter2") == std::string::npos);
  CHECK(u.status().message().find("key:") == std::string::npos);
}

TEST_CASE("s3 url: IsS3Url tells an S3 URL from a directory", "[s3][url]") {
  CHECK(IsS3Url("s3:http://host/bucket"));
  CHECK_FALSE(IsS3Url("/srv/backup/repo"));
  CHECK_FALSE(IsS3Url("./s3:repo"));
}
