#include "repository/record.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "repository/keys.h"
#include "repository/pack_record.h"

using wanbackup::Secret;
using wanbackup::StatusCode;
using namespace wanbackup::pipeline;

namespace {

std::vector<uint8_t> Text(size_t size) {
  std::vector<uint8_t> v(size);
  const char* words = "the quick brown fox jumps over the lazy dog ";
  for (size_t i = 0; i < size; ++i)
    v[i] = static_cast<uint8_t>(words[i % 44]);
  return v;
}

std::vector<uint8_t> Noise(size_t size) {
  std::vector<uint8_t> v(size);
  uint64_t x = 88172645463325252ull;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

std::vector<uint8_t> Encode(RecordCodec& codec, const KeySet& keys,
                            const std::vector<uint8_t>& data) {
  size_t n = 0;
  uint8_t flags = 0;
  const uint8_t* payload = codec.Compress(data.data(), data.size(), &n, &flags);
  std::vector<uint8_t> out;
  codec.Seal(payload, n, flags, static_cast<uint32_t>(data.size()),
             keys.DigestOf(data.data(), data.size()), &out);
  return out;
}

wanbackup::Status Decode(RecordCodec& codec, const std::vector<uint8_t>& record,
                         std::vector<uint8_t>* out) {
  auto header = ParseRecordHeader(record.data());
  if (!header.ok()) return header.status();
  out->resize(header->raw_size);
  return codec.Open(*header, record.data() + kRecordHeaderSize, out->data());
}

}  // namespace

TEST_CASE("records: compressible data is compressed, sealed and opened intact", "[record]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys(RandomKey());
  RecordCodec codec(keys, 3);
  const auto data = Text(1 << 20);
  const auto record = Encode(codec, keys, data);
  CHECK(record.size() < data.size() / 10);
  auto header = ParseRecordHeader(record.data());
  REQUIRE(header.ok());
  CHECK((header->flags & kRecordCompressed) != 0);
  CHECK((header->flags & kRecordEncrypted) != 0);
  std::vector<uint8_t> back;
  REQUIRE(Decode(codec, record, &back).ok());
  CHECK(back == data);
}

TEST_CASE("records: incompressible data is kept raw", "[record]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys(RandomKey());
  RecordCodec codec(keys, 3);
  const auto data = Noise(256 << 10);
  const auto record = Encode(codec, keys, data);
  CHECK((ParseRecordHeader(record.data())->flags & kRecordCompressed) == 0);
  std::vector<uint8_t> back;
  REQUIRE(Decode(codec, record, &back).ok());
  CHECK(back == data);
}

TEST_CASE("records: any changed byte is detected", "[record]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys(RandomKey());
  RecordCodec codec(keys, 3);
  const auto record = Encode(codec, keys, Text(64 << 10));
  for (size_t pos :
       {size_t{5}, size_t{20}, kRecordHeaderSize + 3, kRecordHeaderSize + 40, record.size() - 1}) {
    INFO("byte " << pos);
    auto damaged = record;
    damaged[pos] ^= 0x01;
    std::vector<uint8_t> back;
    CHECK(Decode(codec, damaged, &back).code() == StatusCode::kCorruption);
  }
}

TEST_CASE("records: another key cannot open them", "[record]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys(RandomKey());
  const KeySet other(RandomKey());
  RecordCodec codec(keys, 3), stranger(other, 3);
  const auto record = Encode(codec, keys, Text(4096));
  std::vector<uint8_t> back;
  CHECK(Decode(stranger, record, &back).code() == StatusCode::kCorruption);
}

TEST_CASE("records: unencrypted repositories still detect damage through the digest", "[record]") {
  REQUIRE(InitCrypto().ok());
  const KeySet keys = KeySet::Unencrypted("0123456789abcdef0123456789abcdef");
  RecordCodec codec(keys, 0);
  const auto data = Text(8192);
  auto record = Encode(codec, keys, data);
  CHECK((ParseRecordHeader(record.data())->flags & kRecordEncrypted) == 0);
  std::vector<uint8_t> back;
  REQUIRE(Decode(codec, record, &back).ok());
  record[kRecordHeaderSize + 100] ^= 0x20;
  CHECK(Decode(codec, record, &back).code() == StatusCode::kCorruption);
}

TEST_CASE("keys: digests are keyed and the wrapped key needs the right passphrase", "[record]") {
  REQUIRE(InitCrypto().ok());
  const SecureKey master = RandomKey();
  const auto data = Text(100);
  CHECK(KeySet(master).DigestOf(data.data(), data.size()) !=
        KeySet(RandomKey()).DigestOf(data.data(), data.size()));
  KdfParams kdf = NewKdfParams();
  kdf.opslimit = 1;
  kdf.memlimit = 8 << 20;
  const SecureKey kek = KeyFromPassphrase(Secret("right"), kdf).value();
  const std::string wrapped = WrapKey(master, kek, "repo-1");
  CHECK(UnwrapKey(wrapped, kek, "repo-1").value() == master);
  const SecureKey wrong = KeyFromPassphrase(Secret("wrong"), kdf).value();
  CHECK(UnwrapKey(wrapped, wrong, "repo-1").status().code() == StatusCode::kAuthFailed);
  CHECK(UnwrapKey(wrapped, kek, "repo-2").status().code() == StatusCode::kAuthFailed);
  CHECK(KeyFromKeyFile(Secret("not hex\n")).status().code() == StatusCode::kInvalidArgument);
  CHECK(KeyFromKeyFile(NewKeyFileContents()).ok());
}

TEST_CASE("packs: a catalog record size beyond any chunk is refused before it sizes a buffer",
          "[record]") {
  char path[] = "/tmp/wb-pack-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::vector<uint8_t> buffer;
  auto r = wanbackup::pipeline::ReadRecordAt(fd, 0, 0xffffffffu, &buffer);
  ::close(fd);
  ::unlink(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == wanbackup::StatusCode::kCorruption);
  CHECK(buffer.capacity() < (1u << 20));
}
