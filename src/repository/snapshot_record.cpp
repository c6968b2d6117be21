#include "repository/snapshot_record.h"

#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "common/text.h"
#include "repository/internal/json_fields.h"

namespace wanbackup::pipeline {
namespace {

constexpr char kSegmentMagic[4] = {'W', 'B', 'M', 'S'};
constexpr uint8_t kSegmentVersion = 1;
constexpr int kSnapshotRecordVersion = 1;
constexpr int kForgetRecordVersion = 1;

}  // namespace

uint64_t SealedSegmentCount(uint64_t size_bytes, uint32_t chunk_size) {
  if (chunk_size == 0) return 0;
  const uint64_t chunks = (size_bytes + chunk_size - 1) / chunk_size;
  return (chunks + kSealedSegmentChunks - 1) / kSealedSegmentChunks;
}

std::string EncodeMapSegment(const std::vector<Digest>& digests) {
  std::string out(kMapSegmentHeaderSize + digests.size() * sizeof(Digest), '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  std::memcpy(p, kSegmentMagic, sizeof kSegmentMagic);
  p[4] = kSegmentVersion;
  PutU32(p + 8, static_cast<uint32_t>(digests.size()));
  for (size_t i = 0; i < digests.size(); ++i)
    std::memcpy(p + kMapSegmentHeaderSize + i * sizeof(Digest), digests[i].data(), sizeof(Digest));
  return out;
}

Result<std::vector<Digest>> DecodeMapSegment(const uint8_t* data, size_t size) {
  if (size < kMapSegmentHeaderSize || std::memcmp(data, kSegmentMagic, 4) != 0) {
    return Status::Corruption("a map segment record has no segment header");
  }
  if (data[4] != kSegmentVersion) {
    return Status::Unsupported("map segment version " + std::to_string(data[4]) + " is unknown");
  }
  const uint32_t count = GetU32(data + 8);
  if (count == 0 || count > kSealedSegmentChunks ||
      size != kMapSegmentHeaderSize + uint64_t{count} * sizeof(Digest)) {
    return Status::Corruption("a map segment record has the wrong size for its " +
                              std::to_string(count) + " entries");
  }
  std::vector<Digest> digests(count);
  for (uint32_t i = 0; i < count; ++i)
    std::memcpy(digests[i].data(), data + kMapSegmentHeaderSize + size_t{i} * sizeof(Digest),
                sizeof(Digest));
  return digests;
}

Result<std::string> EncodeSnapshotRecord(const SnapshotRecord& r) {
  const catalog::SnapshotInfo& i = r.info;
  // JSON holds only UTF-8, and the record must hold these exactly (the catalog is checked
  // against it): refuse what it cannot hold. The snapshot checks source and tag before it
  // starts; this is the last line, for the host name and for migrated old snapshots.
  for (const auto& [what, text] : {std::pair<const char*, const std::string*>{"source", &i.source},
                                   {"tag", &i.tag},
                                   {"host name", &i.hostname},
                                   {"job name", &i.job}}) {
    if (!IsUtf8(*text)) {
      return Status::InvalidArgument("snapshot " + std::to_string(i.id) + ": its " + what +
                                     " is not UTF-8 text, which a snapshot record cannot hold");
    }
  }
  nlohmann::json segments = nlohmann::json::array();
  for (const Digest& d : r.segments)
    segments.push_back(ToHex(d.data(), d.size()));
  const nlohmann::json j = {{"version", kSnapshotRecordVersion},
                            {"repository_id", r.repository_id},
                            {"id", i.id},
                            {"source", i.source},
                            {"tag", i.tag},
                            {"hostname", i.hostname},
                            {"size_bytes", i.size_bytes},
                            {"block_size", i.block_size},
                            {"chunk_size", i.chunk_size},
                            {"started_unix_ms", i.started_unix_ms},
                            {"finished_unix_ms", i.finished_unix_ms},
                            {"bytes_read", i.bytes_read},
                            {"bytes_new", i.bytes_new},
                            {"bytes_stored", i.bytes_stored},
                            {"chunks_total", i.chunks_total},
                            {"chunks_new", i.chunks_new},
                            {"chunks_zero", i.chunks_zero},
                            {"segment_chunks", kSealedSegmentChunks},
                            {"segments", segments}};
  if (i.job.empty()) return j.dump();
  // "job" came after version 1 was frozen, and only when there is one: a reader that does not
  // know the key ignores it, and a snapshot taken by hand seals the same bytes as before.
  nlohmann::json with_job = j;
  with_job["job"] = i.job;
  return with_job.dump();
}

Result<SnapshotRecord> DecodeSnapshotRecord(const uint8_t* data, size_t size) {
  if (size > kMaxSnapshotRecordSize) return Status::Corruption("a snapshot record is too large");
  SnapshotRecord r;
  catalog::SnapshotInfo& i = r.info;
  try {
    const auto j = nlohmann::json::parse(data, data + size);
    const int version = internal::IntField<int>(j, "version");
    if (version != kSnapshotRecordVersion) {
      return Status::Unsupported("snapshot record version " + std::to_string(version) +
                                 " is unknown");
    }
    r.repository_id = j.at("repository_id").get<std::string>();
    i.id = internal::IntField<int64_t>(j, "id");
    i.source = j.at("source").get<std::string>();
    i.tag = j.at("tag").get<std::string>();
    i.hostname = j.at("hostname").get<std::string>();
    if (j.contains("job")) i.job = j.at("job").get<std::string>();
    i.size_bytes = internal::IntField<uint64_t>(j, "size_bytes");
    i.block_size = internal::IntField<uint32_t>(j, "block_size");
    i.chunk_size = internal::IntField<uint32_t>(j, "chunk_size");
    i.started_unix_ms = internal::IntField<int64_t>(j, "started_unix_ms");
    i.finished_unix_ms = internal::IntField<int64_t>(j, "finished_unix_ms");
    i.bytes_read = internal::IntField<uint64_t>(j, "bytes_read");
    i.bytes_new = internal::IntField<uint64_t>(j, "bytes_new");
    i.bytes_stored = internal::IntField<uint64_t>(j, "bytes_stored");
    i.chunks_total = internal::IntField<uint64_t>(j, "chunks_total");
    i.chunks_new = internal::IntField<uint64_t>(j, "chunks_new");
    i.chunks_zero = internal::IntField<uint64_t>(j, "chunks_zero");
    if (internal::IntField<uint64_t>(j, "segment_chunks") != kSealedSegmentChunks) {
      return Status::Unsupported("a snapshot record uses another map segment size");
    }
    const auto& segments = j.at("segments");
    if (!segments.is_array()) return Status::Corruption("a snapshot record's segments are bad");
    for (const auto& s : segments) {
      Digest d{};
      if (!FromHex(s.get<std::string>(), d.data(), d.size())) {
        return Status::Corruption("a snapshot record names a malformed segment digest");
      }
      r.segments.push_back(d);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("a snapshot record is malformed: ") + e.what());
  } catch (const internal::JsonFieldError& e) {
    return Status::Corruption(std::string("a snapshot record is malformed: ") + e.what());
  }
  constexpr uint64_t kMaxSourceSize = uint64_t{1} << 60;  // 1 EiB: no overflow below
  if (i.id <= 0 || i.chunk_size == 0 || i.block_size == 0 || i.size_bytes == 0 ||
      i.size_bytes > kMaxSourceSize || i.size_bytes % i.block_size != 0) {
    return Status::Corruption("a snapshot record has impossible sizes");
  }
  if (r.segments.size() != SealedSegmentCount(i.size_bytes, i.chunk_size)) {
    return Status::Corruption("a snapshot record lists " + std::to_string(r.segments.size()) +
                              " map segments for " + std::to_string(i.chunk_count()) + " chunks");
  }
  i.status = catalog::SnapshotStatus::kComplete;
  return r;
}

std::string EncodeForgetRecord(const ForgetRecord& r) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (const ForgottenSnapshot& f : r.snapshots)
    snapshots.push_back({{"id", f.id}, {"record", ToHex(f.record.data(), f.record.size())}});
  const nlohmann::json j = {{"version", kForgetRecordVersion},
                            {"repository_id", r.repository_id},
                            {"forgotten_unix_ms", r.forgotten_unix_ms},
                            {"snapshots", snapshots}};
  return j.dump();
}

Result<ForgetRecord> DecodeForgetRecord(const uint8_t* data, size_t size) {
  if (size > kMaxForgetRecordSize) return Status::Corruption("a forget record is too large");
  ForgetRecord r;
  try {
    const auto j = nlohmann::json::parse(data, data + size);
    const int version = internal::IntField<int>(j, "version");
    if (version != kForgetRecordVersion) {
      return Status::Unsupported("forget record version " + std::to_string(version) +
                                 " is unknown");
    }
    r.repository_id = j.at("repository_id").get<std::string>();
    r.forgotten_unix_ms = internal::IntField<int64_t>(j, "forgotten_unix_ms");
    const auto& snapshots = j.at("snapshots");
    if (!snapshots.is_array() || snapshots.empty()) {
      return Status::Corruption("a forget record names no snapshot");
    }
    for (const auto& s : snapshots) {
      ForgottenSnapshot f;
      f.id = internal::IntField<int64_t>(s, "id");
      if (f.id <= 0 ||
          !FromHex(s.at("record").get<std::string>(), f.record.data(), f.record.size())) {
        return Status::Corruption("a forget record names a malformed snapshot");
      }
      r.snapshots.push_back(f);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("a forget record is malformed: ") + e.what());
  } catch (const internal::JsonFieldError& e) {
    return Status::Corruption(std::string("a forget record is malformed: ") + e.what());
  }
  return r;
}

}  // namespace wanbackup::pipeline
