#include "store/s3_lab.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "store/internal/s3_client.h"
#include "support/testbed.h"

namespace wanbackup::testing {
namespace {

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> vars;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return vars;
}

void EnterNetns(const std::string& name) {
  const std::string path = "/var/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  INFO("opening " << path);
  REQUIRE(fd >= 0);
  const int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  INFO("entering network namespace " << name);
  REQUIRE(rc == 0);
}

void CreateBucket(const S3Lab& lab) {
  pipeline::S3Location loc = lab.NewLocation();
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(loc, lab.Credentials(), pipeline::S3Options{});
  REQUIRE(client.ok());
  pipeline::internal::S3Request r;
  r.method = pipeline::internal::S3Request::Method::kPut;
  const Status s = (*client)->RunOne(&r, "creating the bucket");
  // 409 BucketAlreadyOwnedByYou: a test before this one created it.
  INFO(s.ToString());
  REQUIRE((s.ok() || r.outcome.error_code == "BucketAlreadyOwnedByYou" ||
           r.outcome.error_code == "BucketAlreadyExists"));
}

}  // namespace

const S3Lab& S3Lab::Get() {
  static const S3Lab* lab = [] {
    const Testbed& bed = Testbed::Get();
    std::map<std::string, std::string> vars = ReadEnvFile(std::string(WB_S3LAB_DIR) + "/s3lab.env");
    INFO("the s3lab fixture is not up: run the suite with ctest (tests/s3lab.sh up)");
    REQUIRE(vars.count("S3_ENDPOINT") == 1);
    auto* l = new S3Lab;
    l->endpoint = vars["S3_ENDPOINT"];
    l->access_key = vars["S3_ACCESS_KEY"];
    std::ifstream secret_file(vars["S3_SECRET_FILE"]);
    std::getline(secret_file, l->secret);
    REQUIRE_FALSE(l->secret.empty());
    EnterNetns(bed.netns_a);
    CreateBucket(*l);
    return l;
  }();
  return *lab;
}

pipeline::S3Location S3Lab::NewLocation() const {
  static std::mt19937_64 rng{std::random_device{}()};
  const std::string url = "s3:" + endpoint + "/" + kS3LabBucket + "/t-" + std::to_string(rng());
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  return *loc;
}

pipeline::S3Credentials S3Lab::Credentials() const {
  pipeline::S3Credentials c;
  c.access_key_id = access_key;
  c.secret_access_key = Secret(secret);
  return c;
}

}  // namespace wanbackup::testing
