// What only the S3 store has to get right, against the real radosgw of the s3lab fixture across
// the emulated WAN: idempotent uploads, multipart uploads, refusals as one clear line, and
// damage caught by the records' own authentication, retries through a cut link, readers used by
// several threads at once.
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "repository/keys.h"
#include "repository/pack_record.h"
#include "repository/record.h"
#include "store/internal/s3_client.h"
#include "store/s3_lab.h"
#include "store/s3_pack_store.h"
#include "support/testbed.h"

using namespace wanbackup;
using namespace wanbackup::pipeline;
using wanbackup::pipeline::internal::S3Client;
using wanbackup::pipeline::internal::S3Request;

namespace {

const std::string kS3RepoId = "0123456789abcdef0123456789abcdef";
const std::string kS3Pack = "c3000000000000000000000000000003";

std::vector<uint8_t> S3Bytes(size_t size, uint8_t seed) {
  std::vector<uint8_t> v(size);
  uint32_t x = 2463534242u + seed;
  for (uint8_t& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

std::unique_ptr<S3Client> LabClient(const S3Location& loc, const S3Options& options = {}) {
  Result<std::unique_ptr<S3Client>> c =
      S3Client::Create(loc, testing::S3Lab::Get().Credentials(), options);
  REQUIRE(c.ok());
  return std::move(*c);
}

std::vector<uint8_t> GetWhole(S3Client& client, const std::string& key, size_t size) {
  std::vector<uint8_t> out(size);
  S3Request r;
  r.key = key;
  r.range_out = out.data();
  r.range_size = size;
  REQUIRE(client.RunOne(&r, "reading back").ok());
  REQUIRE(r.received == size);
  return out;
}

std::string PackKey(const S3Location& loc, const std::string& name) {
  return loc.Key("packs/" + name.substr(0, 2) + "/" + name + ".pack");
}

}  // namespace

TEST_CASE("s3 store: uploading the same pack again leaves one object with the same bytes",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const S3Location loc = lab.NewLocation();
  std::unique_ptr<S3Client> client = LabClient(loc);
  const std::vector<uint8_t> bytes = S3Bytes(100'000, 1);
  const std::string key = PackKey(loc, kS3Pack);
  REQUIRE(client->Upload(key, bytes.data(), bytes.size()).ok());
  S3Request first;
  first.method = S3Request::Method::kHead;
  first.key = key;
  REQUIRE(client->RunOne(&first, "head").ok());
  REQUIRE(client->Upload(key, bytes.data(), bytes.size()).ok());  // the retried PUT
  Result<std::vector<internal::S3ListedObject>> listed = client->List(loc.Key("packs/"));
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].size == bytes.size());
  CHECK(GetWhole(*client, key, bytes.size()) == bytes);
  S3Request second;
  second.method = S3Request::Method::kHead;
  second.key = key;
  REQUIRE(client->RunOne(&second, "head").ok());
  CHECK(second.etag == first.etag);  // the MD5 of the same bytes
}

TEST_CASE("s3 store: a large pack goes up in parts and reads back across their boundaries",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  S3Options options;
  options.part_size = 5u << 20;  // S3's smallest part
  options.max_in_flight = 4;
  Result<std::unique_ptr<PackStore>> store =
      NewS3PackStore(lab.NewLocation(), lab.Credentials(), options);
  REQUIRE(store.ok());
  const std::vector<uint8_t> records = S3Bytes((12u << 20) + 777, 2);
  Result<std::unique_ptr<PackWriter>> w = (*store)->Create(kS3Pack, kS3RepoId);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(records.data(), records.size()).ok());
  REQUIRE((*w)->Sync().ok());
  Result<std::unique_ptr<PackReader>> r = (*store)->Open(kS3Pack);
  REQUIRE(r.ok());
  CHECK((*r)->Size().value() == kPackHeaderSize + records.size());
  const size_t boundary = (5u << 20) - kPackHeaderSize;  // the first part ends here
  std::vector<uint8_t> got(1 << 20);
  REQUIRE((*r)->ReadAt(kPackHeaderSize + boundary - 1000, got.data(), got.size()).ok());
  CHECK(std::equal(got.begin(), got.end(), records.begin() + (boundary - 1000)));
}

TEST_CASE("s3 store: uploads in parts from many threads send at most parallel_uploads at once",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const S3Location loc = lab.NewLocation();
  S3Options options;
  options.part_size = 5u << 20;  // S3's smallest part: two parts each
  options.parallel_uploads = 2;
  std::unique_ptr<S3Client> client = LabClient(loc, options);
  const std::vector<uint8_t> bytes = S3Bytes((5u << 20) + 1000, 4);
  constexpr int kThreads = 5;
  std::vector<Status> outcome(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      outcome[i] = client->Upload(loc.Key("up/" + std::to_string(i)), bytes.data(), bytes.size());
    });
  }
  for (std::thread& t : threads)
    t.join();
  for (const Status& s : outcome)
    CHECK(s.ok());
  CHECK(client->most_uploads_at_once() >= 1);
  CHECK(client->most_uploads_at_once() <= 2);
  for (int i = 0; i < kThreads; ++i)
    CHECK(GetWhole(*client, loc.Key("up/" + std::to_string(i)), bytes.size()) == bytes);
}

TEST_CASE(
    "s3 store: an upload in parts begun and never finished is abandoned, and only when "
    "asked",
    "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const S3Location loc = lab.NewLocation();
  std::unique_ptr<S3Client> client = LabClient(loc);
  // What a run killed between its parts and their completion leaves: an upload with a part.
  S3Request start;
  start.method = S3Request::Method::kPost;
  start.key = PackKey(loc, kS3Pack);
  start.query = "uploads=";
  REQUIRE(client->RunOne(&start, "starting an upload").ok());
  const std::optional<std::string> id = internal::XmlElement(start.response, "UploadId");
  REQUIRE(id);
  const std::vector<uint8_t> part = S3Bytes(5u << 20, 3);
  S3Request put;
  put.method = S3Request::Method::kPut;
  put.key = start.key;
  put.query = "partNumber=1&uploadId=" + internal::S3Escape(*id, false);
  put.body = part.data();
  put.body_size = part.size();
  REQUIRE(client->RunOne(&put, "uploading a part").ok());

  Result<std::vector<internal::S3Upload>> before = client->ListUploads(loc.Key("packs/"));
  REQUIRE(before.ok());
  REQUIRE(before->size() == 1);
  CHECK((*before)[0].key == start.key);
  Result<std::unique_ptr<PackStore>> store = NewS3PackStore(loc, lab.Credentials(), {});
  REQUIRE(store.ok());
  CHECK((*store)->List().value().empty());  // no object: List does not show it
  CHECK((*store)->AbandonUnfinished().value() == 1);
  Result<std::vector<internal::S3Upload>> after = client->ListUploads(loc.Key("packs/"));
  REQUIRE(after.ok());
  CHECK(after->empty());
  CHECK((*store)->AbandonUnfinished().value() == 0);
  CHECK(client->AbortUpload((*before)[0]).ok());  // gone already: not an error
}

TEST_CASE("s3 store: a wrong secret is refused in one line that names no secret", "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  S3Credentials wrong = lab.Credentials();
  wrong.secret_access_key = Secret("wrong-secret-for-the-test-0123456789");
  Result<std::unique_ptr<PackStore>> store =
      NewS3PackStore(lab.NewLocation(), std::move(wrong), S3Options{});
  REQUIRE(store.ok());
  Result<std::vector<StoredPack>> listed = (*store)->List();
  REQUIRE_FALSE(listed.ok());
  const std::string message = listed.status().message();
  INFO(message);
  CHECK(listed.status().code() == StatusCode::kAuthFailed);
  CHECK(message.find("AWS_SECRET_ACCESS_KEY") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find("wrong-secret") == std::string::npos);
  CHECK(message.find(lab.secret) == std::string::npos);
}

TEST_CASE("s3 store: a missing bucket is not found", "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  Result<S3Location> loc = ParseS3Url("s3:" + lab.endpoint + "/no-such-bucket-here");
  REQUIRE(loc.ok());
  Result<std::unique_ptr<PackStore>> store = NewS3PackStore(*loc, lab.Credentials(), {});
  REQUIRE(store.ok());
  Result<std::vector<StoredPack>> listed = (*store)->List();
  REQUIRE_FALSE(listed.ok());
  INFO(listed.status().message());
  CHECK(listed.status().code() == StatusCode::kNotFound);
  CHECK(listed.status().message().find("NoSuchBucket") != std::string::npos);
}

TEST_CASE("s3 store: a service that refuses connections fails as unavailable after its retries",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  std::string endpoint = lab.endpoint.substr(0, lab.endpoint.rfind(':')) + ":1";
  Result<S3Location> loc = ParseS3Url("s3:" + endpoint + "/" + testing::kS3LabBucket);
  REQUIRE(loc.ok());
  S3Options options;
  options.max_attempts = 3;
  options.first_backoff = std::chrono::milliseconds(10);
  Result<std::unique_ptr<PackStore>> store = NewS3PackStore(*loc, lab.Credentials(), options);
  REQUIRE(store.ok());
  Result<std::vector<StoredPack>> listed = (*store)->List();
  REQUIRE_FALSE(listed.ok());
  INFO(listed.status().message());
  CHECK(listed.status().code() == StatusCode::kUnavailable);
  CHECK(listed.status().message().find("cannot connect") != std::string::npos);
}

TEST_CASE("s3 store: an object damaged in the store is caught by the record's authentication",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const S3Location loc = lab.NewLocation();
  Result<std::unique_ptr<PackStore>> store = NewS3PackStore(loc, lab.Credentials(), {});
  REQUIRE(store.ok());
  const KeySet keys(RandomKey());
  RecordCodec codec(keys, 3);
  const std::vector<uint8_t> chunk = S3Bytes(64 * 1024, 3);
  std::vector<uint8_t> record;
  codec.SealWhole(chunk.data(), chunk.size(), RecordKind::kChunk, &record);
  Result<std::unique_ptr<PackWriter>> w = (*store)->Create(kS3Pack, kS3RepoId);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(record.data(), record.size()).ok());
  REQUIRE((*w)->Sync().ok());

  // Someone with write access to the bucket flips one byte of the payload.
  std::unique_ptr<S3Client> client = LabClient(loc);
  const std::string key = PackKey(loc, kS3Pack);
  std::vector<uint8_t> object = GetWhole(*client, key, kPackHeaderSize + record.size());
  object[kPackHeaderSize + kRecordHeaderSize + 100] ^= 0x20;
  REQUIRE(client->Upload(key, object.data(), object.size()).ok());

  Result<std::unique_ptr<PackReader>> r = (*store)->Open(kS3Pack);
  REQUIRE(r.ok());
  std::vector<uint8_t> buffer;
  const auto stored = static_cast<uint32_t>(record.size() - kRecordHeaderSize);
  Result<RecordHeader> header = ReadRecordAt(**r, kPackHeaderSize, stored, &buffer);
  INFO(header.status().ToString());
  REQUIRE(header.ok());
  std::vector<uint8_t> out(header->raw_size);
  const Status opened = codec.Open(*header, buffer.data() + kRecordHeaderSize, out.data());
  CHECK(opened.code() == StatusCode::kCorruption);
}

TEST_CASE("s3 store: connections cut by a 2 s blackhole of the WAN are retried until it lifts",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  testing::LinkScope link;
  S3Options options;
  options.connect_timeout = std::chrono::milliseconds(500);  // SYNs are lost while it lasts
  options.max_attempts = 10;  // backoff alone adds up to more than 40 s
  const S3Location loc = lab.NewLocation();
  const std::vector<uint8_t> bytes = S3Bytes(2u << 20, 4);
  const std::string key = PackKey(loc, kS3Pack);
  // New clients: no connection to reuse, so each starts by connecting into the blackhole.
  testing::Testbed::Get().Wan("blackhole 2s");
  std::unique_ptr<S3Client> writer = LabClient(loc, options);
  const Status uploaded = writer->Upload(key, bytes.data(), bytes.size());
  INFO(uploaded.ToString());
  REQUIRE(uploaded.ok());
  CHECK(writer->retries() > 0);
  testing::Testbed::Get().Wan("blackhole 2s");
  std::unique_ptr<S3Client> reader = LabClient(loc, options);
  CHECK(GetWhole(*reader, key, bytes.size()) == bytes);
  CHECK(reader->retries() > 0);
}

TEST_CASE("s3 store: one reader serves ranged reads from several threads at once", "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  Result<std::unique_ptr<PackStore>> store =
      NewS3PackStore(lab.NewLocation(), lab.Credentials(), {});
  REQUIRE(store.ok());
  const std::vector<uint8_t> records = S3Bytes(1u << 20, 5);
  Result<std::unique_ptr<PackWriter>> w = (*store)->Create(kS3Pack, kS3RepoId);
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(records.data(), records.size()).ok());
  REQUIRE((*w)->Sync().ok());
  Result<std::unique_ptr<PackReader>> r = (*store)->Open(kS3Pack);
  REQUIRE(r.ok());
  const PackReader& reader = **r;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const size_t offset = static_cast<size_t>((t * 20 + i) * 7919) % (records.size() - 4096);
        std::vector<uint8_t> got(4096);
        if (!reader.ReadAt(kPackHeaderSize + offset, got.data(), got.size()).ok() ||
            !std::equal(got.begin(), got.end(), records.begin() + static_cast<ptrdiff_t>(offset))) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& th : threads)
    th.join();
  CHECK(wrong == 0);
}

TEST_CASE("s3 store: https to a service that speaks no TLS fails at once as a TLS failure",
          "[s3lab]") {
  const testing::S3Lab& lab = testing::S3Lab::Get();
  const std::string authority = lab.endpoint.substr(lab.endpoint.find("//") + 2);
  Result<S3Location> loc = ParseS3Url("s3:https://" + authority + "/" + testing::kS3LabBucket);
  REQUIRE(loc.ok());
  Result<std::unique_ptr<S3Client>> client = S3Client::Create(*loc, lab.Credentials(), {});
  REQUIRE(client.ok());
  Result<std::vector<internal::S3ListedObject>> listed = (*client)->List("");
  REQUIRE_FALSE(listed.ok());
  INFO(listed.status().message());
  CHECK(listed.status().code() == StatusCode::kAuthFailed);
  CHECK(listed.status().message().find("TLS refused") != std::string::npos);
  CHECK((*client)->retries() == 0);
}
