#include "pipeline/catalog_rebuild.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>

#include "pipeline/pack.h"
#include "pipeline/record.h"
#include "pipeline/snapshot_record.h"

namespace wanbackup::pipeline {
namespace {

struct PackFile {
  std::string name;  // 32 hex digits
  std::string path;
  int64_t mtime_ns = 0;
  uint64_t size = 0;
};

struct Location {
  int fd = -1;
  uint64_t offset = 0;
  uint32_t stored_size = 0;
};

struct DigestHash {
  size_t operator()(const Digest& d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

bool IsPackName(const std::string& file, std::string* name) {
  constexpr size_t kHex = 32;
  if (file.size() != kHex + 5 || file.compare(kHex, 5, ".pack") != 0) return false;
  *name = file.substr(0, kHex);
  return std::all_of(name->begin(), name->end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Every pack file, oldest first (the order records were written, so the first copy of a
// duplicated chunk is the one an earlier catalog named).
Result<std::vector<PackFile>> ListPacks(const std::string& packs_dir) {
  std::vector<PackFile> packs;
  DIR* top = ::opendir(packs_dir.c_str());
  if (top == nullptr) return Status::FromErrno(errno, "listing " + packs_dir);
  while (dirent* sub = ::readdir(top)) {
    const std::string prefix = sub->d_name;
    if (prefix.size() != 2) continue;
    std::string dir = packs_dir;
    dir += "/";
    dir += prefix;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      PackFile p;
      if (!IsPackName(e->d_name, &p.name) || p.name.compare(0, 2, prefix) != 0) continue;
      p.path = dir + "/" + e->d_name;
      struct stat st {};
      if (::stat(p.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      p.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
      p.size = static_cast<uint64_t>(st.st_size);
      packs.push_back(p);
    }
    ::closedir(d);
  }
  ::closedir(top);
  std::sort(packs.begin(), packs.end(), [](const PackFile& a, const PackFile& b) {
    return std::tie(a.mtime_ns, a.name) < std::tie(b.mtime_ns, b.name);
  });
  return packs;
}

size_t MaxRawSize(RecordKind kind, uint32_t chunk_size) {
  switch (kind) {
    case RecordKind::kChunk:
      return chunk_size;
    case RecordKind::kMapSegment:
      return kMaxMapSegmentSize;
    case RecordKind::kSnapshot:
      return kMaxSnapshotRecordSize;
  }
  return 0;
}

class Rebuilder {
 public:
  Rebuilder(Repository& repo, const RebuildOptions& options)
      : repo_(repo), options_(options), codec_(repo.keys(), 0) {}
  ~Rebuilder() {
    for (int fd : fds_)
      ::close(fd);
  }

  Result<RebuildReport> Run();

 private:
  Status IndexPack(const PackFile& pack);
  Status IndexRecord(const PackFile& pack, int fd, int64_t pack_id, uint64_t offset,
                     const RecordHeader& h);
  Status AddSnapshot(int64_t record_id, const SnapshotRecord& r);
  Result<std::vector<Digest>> LoadSegment(const Digest& digest);

  Repository& repo_;
  const RebuildOptions& options_;
  RecordCodec codec_;
  std::unique_ptr<catalog::Catalog> catalog_;
  RebuildReport report_;
  std::vector<int> fds_;
  std::unordered_map<Digest, Location, DigestHash> segments_;
  std::map<int64_t, std::pair<int64_t, SnapshotRecord>> snapshots_;  // id -> record row, record
  std::vector<uint8_t> record_, plain_;
  uint64_t bytes_done_ = 0, bytes_total_ = 0;
};

Status Rebuilder::IndexRecord(const PackFile& pack, int fd, int64_t pack_id, uint64_t offset,
                              const RecordHeader& h) {
  const auto where = [&] { return pack.name + " at " + std::to_string(offset); };
  if (h.raw_size > MaxRawSize(h.kind, repo_.config().chunk_size)) {
    ++report_.damaged_records;
    report_.problems.push_back("record in pack " + where() + " claims an impossible size");
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(RecordHeader read, ReadRecordAt(fd, offset, h.stored_size, &record_));
  plain_.resize(read.raw_size);
  Status open = codec_.Open(read, record_.data() + kRecordHeaderSize, plain_.data());
  if (!open.ok()) {
    ++report_.damaged_records;
    report_.problems.push_back("record in pack " + where() + " left out: " + open.message());
    return Status::Ok();
  }
  ++report_.records;
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> known, catalog_->FindChunk(read.digest));
  if (known) {
    ++report_.duplicates;
    return Status::Ok();
  }
  catalog::ChunkRecord c;
  c.kind = static_cast<catalog::ChunkKind>(read.kind);
  c.digest = read.digest;
  c.pack_id = pack_id;
  c.offset = offset;
  c.stored_size = read.stored_size;
  c.raw_size = read.raw_size;
  WB_ASSIGN_OR_RETURN(const int64_t id, catalog_->AddChunk(c));
  if (read.kind == RecordKind::kMapSegment) {
    segments_[read.digest] = Location{fd, offset, read.stored_size};
  } else if (read.kind == RecordKind::kSnapshot) {
    Result<SnapshotRecord> r = DecodeSnapshotRecord(plain_.data(), plain_.size());
    if (!r.ok()) {
      report_.problems.push_back("snapshot record in pack " + where() + ": " +
                                 r.status().message());
    } else if (r->repository_id != repo_.config().id) {
      report_.problems.push_back("snapshot record in pack " + where() +
                                 " belongs to another repository; left out");
    } else if (!snapshots_.emplace(r->info.id, std::make_pair(id, *r)).second) {
      report_.problems.push_back("snapshot " + std::to_string(r->info.id) +
                                 " is sealed twice; the copy in pack " + where() + " is left out");
    }
  }
  return Status::Ok();
}

Status Rebuilder::IndexPack(const PackFile& pack) {
  const int fd = ::open(pack.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening " + pack.path);
  fds_.push_back(fd);
  if (Status s = CheckPackHeader(fd, repo_.config().id, pack.path); !s.ok()) {
    report_.problems.push_back(s.message() + "; left out");
    bytes_done_ += pack.size;
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(const int64_t pack_id, catalog_->AddPack(pack.name));
  ++report_.packs;
  uint64_t offset = kPackHeaderSize;
  while (offset + kRecordHeaderSize <= pack.size) {
    uint8_t bytes[kRecordHeaderSize];
    WB_RETURN_IF_ERROR(ReadPackBytes(fd, offset, bytes, sizeof bytes));
    Result<RecordHeader> h = ParseRecordHeader(bytes);
    if (!h.ok() || offset + kRecordHeaderSize + h->stored_size > pack.size) break;
    WB_RETURN_IF_ERROR(IndexRecord(pack, fd, pack_id, offset, *h));
    offset += kRecordHeaderSize + h->stored_size;
    if (options_.on_progress) options_.on_progress(bytes_done_ + offset, bytes_total_);
  }
  // What follows the last whole record was being written when a run was interrupted.
  report_.torn_bytes += pack.size - offset;
  bytes_done_ += pack.size;
  return catalog_->SetPackSize(pack_id, offset);
}

Result<std::vector<Digest>> Rebuilder::LoadSegment(const Digest& digest) {
  auto it = segments_.find(digest);
  if (it == segments_.end()) return Status::NotFound("a map segment is missing from the packs");
  const Location& l = it->second;
  WB_ASSIGN_OR_RETURN(RecordHeader h, ReadRecordAt(l.fd, l.offset, l.stored_size, &record_));
  plain_.resize(h.raw_size);
  WB_RETURN_IF_ERROR(codec_.Open(h, record_.data() + kRecordHeaderSize, plain_.data()));
  return DecodeMapSegment(plain_.data(), plain_.size());
}

// The snapshot's catalog rows from its sealed record; every chunk it names must be indexed.
Status Rebuilder::AddSnapshot(int64_t record_id, const SnapshotRecord& r) {
  const catalog::SnapshotInfo& info = r.info;
  const uint64_t chunks = info.chunk_count();
  std::vector<int64_t> ids;  // grows with the segments really found, whatever the size claims
  uint64_t missing = 0;
  for (const Digest& segment_digest : r.segments) {
    Result<std::vector<Digest>> segment = LoadSegment(segment_digest);
    if (!segment.ok()) {
      report_.problems.push_back("snapshot " + std::to_string(info.id) +
                                 " not rebuilt: " + segment.status().message());
      return Status::Ok();
    }
    for (const Digest& d : *segment) {
      if (ids.size() == chunks) break;
      if (d == kZeroChunkDigest) {
        ids.push_back(0);
        continue;
      }
      WB_ASSIGN_OR_RETURN(std::optional<int64_t> id, catalog_->FindChunk(d));
      if (!id) ++missing;
      ids.push_back(id.value_or(0));
    }
  }
  if (ids.size() != chunks || missing > 0) {
    report_.problems.push_back("snapshot " + std::to_string(info.id) +
                               " not rebuilt: " + std::to_string(missing) +
                               " of its chunks are missing from the " + "packs");
    return Status::Ok();
  }
  catalog::SnapshotInfo row = info;
  row.record_id = record_id;
  WB_RETURN_IF_ERROR(catalog_->InsertCompleteSnapshot(row));
  for (uint64_t first = 0; first < chunks; first += catalog::kMapSegmentChunks) {
    const uint64_t count = std::min(catalog::kMapSegmentChunks, chunks - first);
    const std::vector<int64_t> part(ids.begin() + static_cast<ptrdiff_t>(first),
                                    ids.begin() + static_cast<ptrdiff_t>(first + count));
    WB_RETURN_IF_ERROR(catalog_->PutMapSegment(info.id, first, part));
  }
  report_.snapshots.push_back(info.id);
  return Status::Ok();
}

Result<RebuildReport> Rebuilder::Run() {
  const std::string built = repo_.CatalogPath() + ".rebuilding";
  for (const char* suffix : {"", "-wal", "-shm"})
    ::unlink((built + suffix).c_str());
  WB_ASSIGN_OR_RETURN(std::vector<PackFile> packs, ListPacks(repo_.path() + "/packs"));
  for (const PackFile& p : packs)
    bytes_total_ += p.size;
  {
    WB_ASSIGN_OR_RETURN(catalog_, catalog::Catalog::Open(built, true));
    ::chmod(built.c_str(), 0600);
    WB_ASSIGN_OR_RETURN(auto txn, catalog_->Begin());
    for (const PackFile& p : packs)
      WB_RETURN_IF_ERROR(IndexPack(p));
    for (const auto& [id, entry] : snapshots_)
      WB_RETURN_IF_ERROR(AddSnapshot(entry.first, entry.second));
    WB_RETURN_IF_ERROR(txn->Commit());
    WB_RETURN_IF_ERROR(repo_.WriteSettings(catalog_.get()));
    catalog_.reset();  // closes it: the WAL is folded into the file
  }
  WB_RETURN_IF_ERROR(repo_.InstallCatalog(built, &report_.old_catalog));
  return report_;
}

}  // namespace

Result<RebuildReport> RebuildCatalog(Repository& repo, const RebuildOptions& options) {
  Rebuilder r(repo, options);
  return r.Run();
}

}  // namespace wanbackup::pipeline
