// The S3 lab that the CTest fixture `s3lab` starts (tests/s3lab.sh, scripts/s3lab): Ceph with
// radosgw in site B of the testbed, so requests cross the emulated WAN. A test that uses it
// runs in site A: Get() moves the calling process's network namespace there (before any thread
// starts, so every thread libcurl starts is there too). Not thread-safe; call it first.
#pragma once

#include <string>

#include "store/s3_pack_store.h"
#include "store/s3_url.h"

namespace wanbackup::testing {

struct S3Lab {
  std::string endpoint;  // http://198.18.0.2:7480
  std::string access_key;
  std::string secret;

  // Loads the lab's description, enters site A, and makes sure the tests' bucket exists;
  // fails the test (REQUIRE) when the fixture is not up.
  static const S3Lab& Get();

  // The tests' bucket with a prefix of its own for each call ("t-<random>").
  pipeline::S3Location NewLocation() const;
  pipeline::S3Credentials Credentials() const;
};

inline constexpr const char* kS3LabBucket = "wanbackup-tests";

}  // namespace wanbackup::testing
