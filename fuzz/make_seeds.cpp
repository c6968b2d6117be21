// Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from the real encoders:
//   build/fuzz/fuzz/fuzz_make_seeds fuzz/corpus
// The output is committed; run again when a format changes.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "catalog/map_codec.h"
#include "fuzz/fuzz_keys.h"
#include "repository/record.h"
#include "repository/repository.h"
#include "repository/snapshot_record.h"
#include "store/pack.h"

using namespace wanbackup;
using namespace wanbackup::pipeline;

namespace {

std::string out_dir;

void Write(const std::string& target, const std::string& name, const void* data, size_t size) {
  const std::string dir = out_dir + "/" + target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}
void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  Write(target, name, bytes.data(), bytes.size());
}

std::vector<uint8_t> Sealed(RecordCodec& codec, const std::string& plain, RecordKind kind) {
  std::vector<uint8_t> record;
  codec.SealWhole(reinterpret_cast<const uint8_t*>(plain.data()), plain.size(), kind, &record);
  return record;
}

std::string SnapshotRecordText() {
  SnapshotRecord r;
  r.repository_id = fuzz::kRepositoryId;
  r.info.id = 3;
  r.info.source = "iscsi://san/iqn.2001-05.com.example:db/1";
  r.info.tag = "nightly";
  r.info.hostname = "backup1";
  r.info.size_bytes = 3 * 65536 + 512;
  r.info.block_size = 512;
  r.info.chunk_size = 65536;
  r.info.started_unix_ms = 1764000000000;
  r.info.finished_unix_ms = 1764000001000;
  r.segments = {Digest{1, 2, 3}};
  return EncodeSnapshotRecord(r).value();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR\n");
    return 2;
  }
  out_dir = argv[1];
  if (!InitCrypto().ok()) return 1;
  RecordCodec encrypted(fuzz::EncryptedKeys(), 3);
  RecordCodec plain(KeySet::Unencrypted(fuzz::kRepositoryId), 3);
  const std::string text(4096, 'a');
  std::string noise(1024, '\0');
  for (size_t i = 0; i < noise.size(); ++i)
    noise[i] = static_cast<char>(i * 131 + 7);
  const std::string segment = EncodeMapSegment({Digest{9}, Digest{}, Digest{7, 7}});
  const std::string snapshot = SnapshotRecordText();

  const std::vector<std::pair<std::string, std::vector<uint8_t>>> records = {
      {"chunk-compressed", Sealed(encrypted, text, RecordKind::kChunk)},
      {"chunk-raw", Sealed(encrypted, noise, RecordKind::kChunk)},
      {"chunk-unencrypted", Sealed(plain, text, RecordKind::kChunk)},
      {"map-segment", Sealed(encrypted, segment, RecordKind::kMapSegment)},
      {"snapshot", Sealed(encrypted, snapshot, RecordKind::kSnapshot)},
  };
  for (const auto& [name, bytes] : records)
    Write("record", name, bytes.data(), bytes.size());

  char tmpl[] = "/tmp/wb-seed-pack-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return 1;
  ::close(fd);
  ::unlink(tmpl);
  {
    auto pack = PackWriter::Create(tmpl, fuzz::kRepositoryId);
    if (!pack.ok()) return 1;
    for (size_t i = 0; i < 3; ++i)
      (void)(*pack)->Append(records[i].second.data(), records[i].second.size());
  }
  std::ifstream in(tmpl, std::ios::binary);
  Write("pack", "three-records", std::string(std::istreambuf_iterator<char>(in), {}));
  ::unlink(tmpl);

  auto map = [](uint32_t count, const std::vector<int64_t>& ids) {
    std::string bytes(4, '\0');
    for (int i = 0; i < 4; ++i)
      bytes[static_cast<size_t>(i)] = static_cast<char>(count >> (8 * i));
    return bytes + catalog::EncodeChunkMap(ids);
  };
  Write("map_codec", "sequential", map(6, {1, 2, 3, 4, 5, 6}));
  Write("map_codec", "zeros-and-repeats", map(7, {0, 0, 9, 9, 10, 3, 0}));

  Write("snapshot_record", "snapshot", snapshot);
  Write("snapshot_record", "map-segment", segment);

  Write("config", "passphrase",
        R"({"authentication": "884f", "chunk_size": 4194304,
  "compression": {"algorithm": "zstd", "level": 3}, "created": "2026-11-25T05:28:16Z",
  "encryption": {"cipher": "xchacha20poly1305-ietf", "digest": "blake2b-256-keyed",
    "kdf": {"algorithm": "argon2id13", "memlimit": 134217728, "opslimit": 3,
            "salt": "e52ce2a3584e7ba66745b1df4883fd63"},
    "mode": "passphrase", "wrapped_key": "780e"},
  "format": 2, "repository_id": "11c13b49a744405530bc20edd1d8c04e"})");
  Write("config", "none",
        R"({"chunk_size": 65536, "compression": {"algorithm": "zstd", "level": 0},
  "encryption": {"mode": "none"}, "format": 1,
  "repository_id": "11c13b49a744405530bc20edd1d8c04e"})");
  return 0;
}
