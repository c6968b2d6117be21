#include "repository/snapshot_check.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "repository/pack_record.h"

namespace wanbackup::pipeline {
namespace {

std::string Tampered(int64_t id, const std::string& what) {
  return "snapshot " + std::to_string(id) +
         ": the catalog disagrees with the snapshot's sealed record (catalog.db was altered or "
         "damaged): " +
         what;
}

struct IndexedChunk {
  uint64_t index;  // in the snapshot
  catalog::ChunkRecord chunk;
};

// Object storage: record headers read at once, each a round trip of its own.
constexpr size_t kRemoteHeaderReads = 64;

// Runs step(0) .. step(count - 1) on up to `threads` threads (on this one when 1), in order of
// index; once a step returns false no new step starts.
void RunAtOnce(size_t threads, size_t count, const std::function<bool(size_t)>& step) {
  threads = std::min(threads, count);
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) {
      if (!step(i)) return;
    }
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < count && !failed; i = next++) {
        if (!step(i)) failed = true;
      }
    });
  }
  for (std::thread& t : pool)
    t.join();
}

// Each chunk's record header, read from its pack, must be its own (digest and size): a catalog
// row pointing elsewhere is found before anything is written. On object storage the reads run
// kRemoteHeaderReads at a time and stop at the first mismatch found.
Status CheckRecordHeaders(Repository& repo, int64_t snapshot_id,
                          const std::vector<IndexedChunk>& chunks) {
  // Every pack opened first, all at once: a chunk's check would otherwise wait for its pack's
  // header to be read, and the threads on the chunks of the same few packs wait together,
  // round trip after round trip.
  std::vector<int64_t> packs;
  for (const IndexedChunk& c : chunks)
    packs.push_back(c.chunk.pack_id);
  std::sort(packs.begin(), packs.end());
  packs.erase(std::unique(packs.begin(), packs.end()), packs.end());
  std::vector<Status> opened(packs.size());
  RunAtOnce(repo.remote() ? kRemoteHeaderReads : 1, packs.size(), [&](size_t i) {
    opened[i] = repo.Pack(packs[i]).status();
    return opened[i].ok();
  });
  for (const Status& s : opened) {
    if (!s.ok()) return s;
  }
  std::vector<Status> outcome(chunks.size());
  auto check = [&](size_t i) {
    const catalog::ChunkRecord& c = chunks[i].chunk;
    Result<const PackReader*> pack = repo.Pack(c.pack_id);
    if (!pack.ok()) {
      outcome[i] = pack.status();
      return;
    }
    Result<RecordHeader> h = ReadRecordHeaderAt(**pack, c.offset, c.stored_size);
    if (!h.ok() && h.status().code() != StatusCode::kCorruption) {
      outcome[i] = h.status();  // the store unreachable, an interrupt: not the catalog's doing
      return;
    }
    if (!h.ok() || h->digest != c.digest || h->raw_size != c.raw_size) {
      outcome[i] = Status::Corruption(
          Tampered(snapshot_id, "chunk " + std::to_string(chunks[i].index) +
                                    " points at a pack record that is not its own"));
    }
  };
  RunAtOnce(repo.remote() ? kRemoteHeaderReads : 1, chunks.size(), [&](size_t i) {
    check(i);
    return outcome[i].ok();
  });
  for (const Status& s : outcome) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// The first metadata field that differs, or empty.
std::string DifferentField(const catalog::SnapshotInfo& a, const catalog::SnapshotInfo& b) {
  if (a.id != b.id) return "id";
  if (a.source != b.source) return "source";
  if (a.tag != b.tag) return "tag";
  if (a.job != b.job) return "job";
  if (a.hostname != b.hostname) return "hostname";
  if (a.size_bytes != b.size_bytes) return "size";
  if (a.block_size != b.block_size) return "block size";
  if (a.chunk_size != b.chunk_size) return "chunk size";
  if (a.started_unix_ms != b.started_unix_ms) return "start time";
  if (a.finished_unix_ms != b.finished_unix_ms) return "finish time";
  if (a.bytes_read != b.bytes_read || a.bytes_new != b.bytes_new ||
      a.bytes_stored != b.bytes_stored || a.chunks_total != b.chunks_total ||
      a.chunks_new != b.chunks_new || a.chunks_zero != b.chunks_zero) {
    return "counters";
  }
  return "";
}

}  // namespace

Result<std::vector<uint8_t>> LoadRecord(Repository& repo, RecordCodec& codec,
                                        const catalog::ChunkRecord& c, RecordKind kind,
                                        size_t max_raw) {
  if (c.raw_size > max_raw) {
    return Status::Corruption("record " + std::to_string(c.id) + " claims " +
                              std::to_string(c.raw_size) + " bytes, more than such a record holds");
  }
  WB_ASSIGN_OR_RETURN(const PackReader* pack, repo.Pack(c.pack_id));
  std::vector<uint8_t> record;
  WB_ASSIGN_OR_RETURN(RecordHeader h, ReadRecordAt(*pack, c.offset, c.stored_size, &record));
  if (h.digest != c.digest || h.raw_size != c.raw_size || h.kind != kind) {
    return Status::Corruption("the record in the pack is not the one the catalog names");
  }
  std::vector<uint8_t> plain(h.raw_size);
  WB_RETURN_IF_ERROR(codec.Open(h, record.data() + kRecordHeaderSize, plain.data()));
  return plain;
}

Status LoadSealedChunk(Repository& repo, RecordCodec& codec, const catalog::ChunkRecord& c,
                       const Digest& sealed, std::vector<uint8_t>* record, uint8_t* out) {
  WB_ASSIGN_OR_RETURN(const PackReader* pack, repo.Pack(c.pack_id));
  WB_ASSIGN_OR_RETURN(RecordHeader h, ReadRecordAt(*pack, c.offset, c.stored_size, record));
  if (h.digest != sealed || h.raw_size != c.raw_size || h.kind != RecordKind::kChunk) {
    return Status::Corruption("the record in the pack is not the chunk the sealed map names");
  }
  return codec.Open(h, record->data() + kRecordHeaderSize, out);
}

Result<SnapshotRecord> LoadSnapshotRecord(Repository& repo, RecordCodec& codec,
                                          const catalog::SnapshotInfo& row) {
  if (row.record_id == 0) {
    return Status::Corruption(Tampered(row.id, "it has no sealed record"));
  }
  Result<catalog::ChunkRecord> c = repo.catalog().GetChunk(row.record_id);
  if (!c.ok()) return Status::Corruption(Tampered(row.id, "its sealed record is not indexed"));
  Result<std::vector<uint8_t>> plain =
      LoadRecord(repo, codec, *c, RecordKind::kSnapshot, kMaxSnapshotRecordSize);
  if (!plain.ok()) {
    return Status::Corruption(Tampered(row.id, "its sealed record: " + plain.status().message()));
  }
  WB_ASSIGN_OR_RETURN(SnapshotRecord r, DecodeSnapshotRecord(plain->data(), plain->size()));
  if (r.repository_id != repo.config().id) {
    return Status::Corruption(Tampered(row.id, "its sealed record is another repository's"));
  }
  return r;
}

Result<SnapshotRecord> LoadMatchingRecord(Repository& repo, RecordCodec& codec,
                                          const catalog::SnapshotInfo& row) {
  WB_ASSIGN_OR_RETURN(SnapshotRecord sealed, LoadSnapshotRecord(repo, codec, row));
  catalog::SnapshotInfo expected = sealed.info;
  expected.record_id = row.record_id;
  if (const std::string field = DifferentField(row, expected); !field.empty()) {
    return Status::Corruption(Tampered(row.id, "its " + field + " differs"));
  }
  return sealed;
}

Status CheckRowsMatchRecords(Repository& repo, const std::vector<catalog::SnapshotInfo>& rows,
                             std::vector<std::string>* unreadable) {
  RecordCodec codec(repo.keys(), repo.config().zstd_level);
  for (const catalog::SnapshotInfo& row : rows) {
    if (unreadable != nullptr && row.record_id != 0) {  // a pack gone is damage, not a forgery
      Result<catalog::ChunkRecord> c = repo.catalog().GetChunk(row.record_id);
      if (c.ok()) {
        Status read =
            LoadRecord(repo, codec, *c, RecordKind::kSnapshot, kMaxSnapshotRecordSize).status();
        if (!read.ok()) {
          unreadable->push_back("snapshot " + std::to_string(row.id) +
                                ": its sealed record cannot be read, so its row is shown "
                                "unchecked: " +
                                read.message());
          continue;
        }
      }
    }
    Result<SnapshotRecord> sealed = LoadSnapshotRecord(repo, codec, row);
    Status s = sealed.status();
    if (s.ok()) {
      catalog::SnapshotInfo expected = sealed->info;
      expected.record_id = row.record_id;
      if (const std::string field = DifferentField(row, expected); !field.empty()) {
        s = Status::Corruption(Tampered(row.id, "its " + field + " differs"));
      }
    }
    WB_RETURN_IF_ERROR(
        s.WithSuffix("; 'wanbackup repair catalog' rebuilds the catalog from the packs"));
  }
  return Status::Ok();
}

Result<Digest> SealedMap::At(uint64_t index) {
  if (index >= record_.info.chunk_count()) {
    return Status::Corruption("chunk " + std::to_string(index) + " lies past the sealed map");
  }
  WB_ASSIGN_OR_RETURN(const std::vector<Digest>* digests, Segment(index / kSealedSegmentChunks));
  return (*digests)[index % kSealedSegmentChunks];
}

Result<const std::vector<Digest>*> SealedMap::Segment(uint64_t segment) {
  if (segment >= record_.segments.size()) {
    return Status::Corruption("map segment " + std::to_string(segment) +
                              " lies past the sealed map");
  }
  if (segment != loaded_) {
    loaded_ = UINT64_MAX;
    const Digest& d = record_.segments[segment];
    WB_ASSIGN_OR_RETURN(std::optional<int64_t> id, repo_.catalog().FindChunk(d));
    if (!id) return Status::Corruption("map segment " + std::to_string(segment) + " is missing");
    WB_ASSIGN_OR_RETURN(catalog::ChunkRecord c, repo_.catalog().GetChunk(*id));
    if (c.digest != d) {
      return Status::Corruption("map segment " + std::to_string(segment) + " is indexed wrongly");
    }
    WB_ASSIGN_OR_RETURN(std::vector<uint8_t> plain,
                        LoadRecord(repo_, codec_, c, RecordKind::kMapSegment, kMaxMapSegmentSize));
    WB_ASSIGN_OR_RETURN(digests_, DecodeMapSegment(plain.data(), plain.size()));
    const uint64_t first = segment * kSealedSegmentChunks;
    const uint64_t chunks = record_.info.chunk_count();
    if (first >= chunks || digests_.size() != std::min(kSealedSegmentChunks, chunks - first)) {
      return Status::Corruption("map segment " + std::to_string(segment) + " has " +
                                std::to_string(digests_.size()) + " entries");
    }
    loaded_ = segment;
  }
  return &digests_;
}

Status CheckSnapshotAgainstRecord(Repository& repo, const catalog::SnapshotInfo& row,
                                  bool check_records) {
  RecordCodec codec(repo.keys(), 0);
  WB_RETURN_IF_ERROR(repo.LoadPacks());
  WB_ASSIGN_OR_RETURN(SnapshotRecord sealed, LoadMatchingRecord(repo, codec, row));
  SealedMap map(repo, codec, sealed);
  Status s = repo.catalog().ForEachMapSegment(
      row.id, [&](uint64_t first, const std::vector<int64_t>& ids) -> Status {
        std::unordered_map<int64_t, catalog::ChunkRecord> rows;
        std::vector<IndexedChunk> headers;
        for (size_t k = 0; k < ids.size(); ++k) {
          const uint64_t index = first + k;
          Result<Digest> want = map.At(index);
          if (!want.ok()) return Status::Corruption(Tampered(row.id, want.status().message()));
          if (ids[k] == 0) {
            if (*want != kZeroChunkDigest) {
              return Status::Corruption(
                  Tampered(row.id, "chunk " + std::to_string(index) + " is not all zeros"));
            }
            continue;
          }
          auto it = rows.find(ids[k]);
          if (it == rows.end()) {
            Result<catalog::ChunkRecord> c = repo.catalog().GetChunk(ids[k]);
            if (!c.ok()) {
              return Status::Corruption(Tampered(
                  row.id, "chunk " + std::to_string(index) + " names a chunk the catalog lacks"));
            }
            it = rows.emplace(ids[k], *c).first;
          }
          const catalog::ChunkRecord& c = it->second;
          const uint64_t length =
              std::min<uint64_t>(row.chunk_size, row.size_bytes - index * row.chunk_size);
          if (c.digest != *want || c.kind != catalog::ChunkKind::kData || c.raw_size != length) {
            return Status::Corruption(
                Tampered(row.id, "chunk " + std::to_string(index) + " names other data"));
          }
          if (check_records) headers.push_back({index, c});
        }
        return check_records ? CheckRecordHeaders(repo, row.id, headers) : Status::Ok();
      });
  if (!s.ok() && s.code() == StatusCode::kCorruption &&
      s.message().find("sealed record") == std::string::npos) {
    return Status::Corruption(Tampered(row.id, s.message()));
  }
  return s;
}

}  // namespace wanbackup::pipeline
