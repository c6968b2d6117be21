#include "store/s3_host.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "store/internal/s3_client.h"
#include "store/s3_lab.h"

namespace wanbackup::testing {

S3Host::S3Host(const TempDir& dir, const std::string& name, std::string repo_url)
    : cache(dir / (name + "-cache")),
      security(dir / (name + "-security")),
      key(dir / "repo.key"),
      url(std::move(repo_url)) {}

RunOptions S3Host::Options(const std::map<std::string, std::string>& env) const {
  RunOptions o;
  const S3Lab& lab = S3Lab::Get();
  o.env = {{"AWS_ACCESS_KEY_ID", lab.access_key},
           {"AWS_SECRET_ACCESS_KEY", lab.secret},
           {"WANBACKUP_REPO", url},
           {"WANBACKUP_KEY_FILE", key},
           {"WANBACKUP_CACHE_DIR", cache},
           {"WANBACKUP_SECURITY_DIR", security}};
  for (const auto& [k, v] : env)
    o.env[k] = v;
  o.timeout = std::chrono::seconds(120);
  return o;
}

RunResult S3Host::Wb(std::vector<std::string> args,
                     const std::map<std::string, std::string>& env) const {
  return Local(std::move(args), Options(env));
}

RunResult S3Host::Ok(std::vector<std::string> args) const {
  RunResult r = Wb(args);
  INFO("wanbackup " << args.front() << ": exit " << r.exit_code << "\nstdout: " << r.out
                    << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

size_t S3Host::SnapshotCount() const {
  return nlohmann::json::parse(Ok({"snapshots", "--json"}).out).size();
}

std::set<int64_t> S3Host::SnapshotIds() const {
  std::set<int64_t> ids;
  for (const auto& s : nlohmann::json::parse(Ok({"snapshots", "--json"}).out))
    ids.insert(s["id"].get<int64_t>());
  return ids;
}

std::string NewS3RepoUrl() {
  return S3Lab::Get().NewLocation().ToString();
}

void PlantS3Lock(const std::string& url, const std::string& kind, int64_t age_s) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  const std::string text = nlohmann::json{
      {"kind", kind},
      {"host", "other-host"},
      {"pid", 4242},
      {"holder", "wanbackup pid 4242 on other-host running 'snapshot'"},
      {"refreshed_unix",
       static_cast<int64_t>(std::time(nullptr)) -
           age_s}}.dump();
  REQUIRE((*client)
              ->Upload(loc->Key("locks/" + kind + "-planted.json"),
                       reinterpret_cast<const uint8_t*>(text.data()), text.size())
              .ok());
}

void RemoveS3Object(const std::string& url, const std::string& key) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  pipeline::internal::S3Request r;
  r.method = pipeline::internal::S3Request::Method::kDelete;
  r.key = key;
  REQUIRE((*client)->RunOne(&r, "removing " + key).ok());
}

std::vector<uint8_t> ReadS3Object(const std::string& url, const std::string& key, uint64_t size) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  std::vector<uint8_t> bytes(size);
  pipeline::internal::S3Request r;
  r.key = key;
  r.range_out = bytes.data();
  r.range_offset = 0;
  r.range_size = size;
  REQUIRE((*client)->RunOne(&r, "reading " + key).ok());
  return bytes;
}

void PutS3Object(const std::string& url, const std::string& key,
                 const std::vector<uint8_t>& bytes) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  REQUIRE((*client)->Upload(key, bytes.data(), bytes.size()).ok());
}

void ScribbleS3Object(const std::string& url, const std::string& key, uint64_t size,
                      uint64_t offset, const std::string& text) {
  REQUIRE(offset + text.size() <= size);
  std::vector<uint8_t> bytes = ReadS3Object(url, key, size);
  std::copy(text.begin(), text.end(), bytes.begin() + static_cast<ptrdiff_t>(offset));
  PutS3Object(url, key, bytes);
}

bool WaitStopped(pid_t pid) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::map<std::string, uint64_t> S3ObjectsAt(const std::string& url) {
  Result<pipeline::S3Location> loc = pipeline::ParseS3Url(url);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<pipeline::internal::S3Client>> client =
      pipeline::internal::S3Client::Create(*loc, S3Lab::Get().Credentials(), {});
  REQUIRE(client.ok());
  Result<std::vector<pipeline::internal::S3ListedObject>> listed = (*client)->List(loc->Key(""));
  REQUIRE(listed.ok());
  std::map<std::string, uint64_t> out;
  for (const auto& o : *listed)
    out[o.key] = o.size;
  return out;
}

std::map<std::string, uint64_t> S3PacksAt(const std::string& url) {
  std::map<std::string, uint64_t> packs;
  for (const auto& [key, size] : S3ObjectsAt(url)) {
    if (key.find("/packs/") != std::string::npos) packs[key] = size;
  }
  return packs;
}

}  // namespace wanbackup::testing
