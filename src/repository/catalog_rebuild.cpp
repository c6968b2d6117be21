#include "repository/catalog_rebuild.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/hex.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "common/units.h"
#include "repository/head.h"
#include "repository/internal/rebuilder.h"
#include "repository/pack_record.h"
#include "repository/record.h"
#include "repository/snapshot_record.h"
#include "repository/trust_anchor.h"

namespace wanbackup::pipeline {
namespace {

using internal::PackFile;

size_t MaxRawSize(RecordKind kind, uint32_t chunk_size) {
  switch (kind) {
    case RecordKind::kChunk:
      return chunk_size;
    case RecordKind::kMapSegment:
      return kMaxMapSegmentSize;
    case RecordKind::kSnapshot:
      return kMaxSnapshotRecordSize;
    case RecordKind::kForget:
      return kMaxForgetRecordSize;
    case RecordKind::kHead:
      return kMaxHeadRecordSize;
  }
  return 0;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The offset of the next record header (magic and CRC) at or after `from`, or `end`. For a walk
// that met a damaged or forged header, whose sizes cannot be trusted to find the next one.
uint64_t NextHeader(const PackReader& reader, uint64_t from, uint64_t end) {
  constexpr size_t kWindow = 1 << 20;
  std::vector<uint8_t> window(kWindow + kRecordHeaderSize);
  for (uint64_t at = from; at + kRecordHeaderSize <= end; at += kWindow) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), end - at));
    if (!reader.ReadAt(at, window.data(), n).ok()) return end;
    for (size_t i = 0; i + kRecordHeaderSize <= n && i < kWindow; ++i) {
      if (std::memcmp(window.data() + i, "WBRC", 4) == 0 && ParseRecordHeader(&window[i]).ok()) {
        return at + i;
      }
    }
  }
  return end;
}

// Counts the reads of the pack it wraps (RebuildReport::reads, bytes_read): on S3, one ranged
// GET each, whichever thread makes it.
class CountingReader final : public PackReader {
 public:
  CountingReader(std::unique_ptr<PackReader> inner, std::atomic<uint64_t>* reads,
                 std::atomic<uint64_t>* bytes)
      : inner_(std::move(inner)), reads_(reads), bytes_(bytes) {}
  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override {
    ++*reads_;
    *bytes_ += size;
    return inner_->ReadAt(offset, data, size);
  }
  Result<uint64_t> Size() const override { return inner_->Size(); }

 private:
  std::unique_ptr<PackReader> inner_;
  std::atomic<uint64_t>* reads_;
  std::atomic<uint64_t>* bytes_;
};

// Object storage: packs whose record headers are read at once (each read a round trip), and
// how many packs' headers may wait in memory for the indexing.
constexpr size_t kRemotePackReads = 16;
constexpr size_t kRemotePacksAhead = 64;

}  // namespace

namespace internal {

Result<std::unique_ptr<PackReader>> Rebuilder::OpenPack(const std::string& name) {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> opened, repo_.packs().Open(name));
  return std::unique_ptr<PackReader>(
      std::make_unique<CountingReader>(std::move(opened), &reads_, &bytes_read_));
}

void Rebuilder::StartReading(std::vector<HeaderPrefetch::Job> jobs) {
  prefetch_.reset();
  size_t threads = kRemotePackReads;
  // Tests compare the catalog built with headers read ahead against the sequential walk's (0).
  if (const char* n = std::getenv("WANBACKUP_TEST_PACK_READERS"); n != nullptr && *n != '\0') {
    threads = std::min<size_t>(std::strtoul(n, nullptr, 10), kRemotePackReads);
  }
  if (!repo_.remote() || jobs.empty() || threads == 0) return;
  prefetch_ = std::make_unique<HeaderPrefetch>(
      std::move(jobs), [this](const std::string& name) { return OpenPack(name); }, threads,
      kRemotePacksAhead);
}

const RebuildReport& Rebuilder::Report() {
  report_.reads = reads_;
  report_.bytes_read = bytes_read_;
  return report_;
}

Result<bool> Rebuilder::IndexRecord(const PackFile& pack, const PackReader& reader, int64_t pack_id,
                                    uint64_t offset, const RecordHeader& h) {
  const auto where = [&] { return pack.name + " at " + std::to_string(offset); };
  if (h.raw_size > MaxRawSize(h.kind, repo_.config().chunk_size)) {
    ++report_.damaged_records;
    report_.problems.push_back("record in pack " + where() + " claims an impossible size");
    return false;
  }
  if (options_.cache && h.kind == RecordKind::kChunk) return IndexChunkHeader(pack_id, offset, h);
  Result<RecordHeader> read = ReadRecordAt(reader, offset, h.stored_size, &record_);
  Status open = read.status();
  if (open.ok()) {
    plain_.resize(read->raw_size);
    open = codec_.Open(*read, record_.data() + kRecordHeaderSize, plain_.data());
  }
  if (!open.ok()) {
    ++report_.damaged_records;
    report_.problems.push_back("record in pack " + where() + " left out: " + open.message());
    return false;
  }
  ++report_.records;
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> known, catalog_->FindChunk(read->digest));
  if (known) {
    ++report_.duplicates;
    return true;
  }
  catalog::ChunkRecord c;
  c.kind = static_cast<catalog::ChunkKind>(read->kind);
  c.digest = read->digest;
  c.pack_id = pack_id;
  c.offset = offset;
  c.stored_size = read->stored_size;
  c.raw_size = read->raw_size;
  WB_ASSIGN_OR_RETURN(const int64_t id, catalog_->AddChunk(c));
  if (read->kind == RecordKind::kMapSegment) {
    segments_[read->digest] = RecordLocation{&reader, offset, read->stored_size};
  } else {
    NoteSealed(*read, id, where());
  }
  return true;
}

Result<bool> Rebuilder::IndexChunkHeader(int64_t pack_id, uint64_t offset, const RecordHeader& h) {
  ++report_.records;
  WB_ASSIGN_OR_RETURN(std::optional<int64_t> known, catalog_->FindChunk(h.digest));
  if (known) {
    ++report_.duplicates;
    return true;
  }
  catalog::ChunkRecord c;
  c.kind = catalog::ChunkKind::kData;
  c.digest = h.digest;
  c.pack_id = pack_id;
  c.offset = offset;
  c.stored_size = h.stored_size;
  c.raw_size = h.raw_size;
  WB_RETURN_IF_ERROR(catalog_->AddChunk(c).status());
  return true;
}

void Rebuilder::NoteSealed(const RecordHeader& read, int64_t id, const std::string& where) {
  if (read.kind == RecordKind::kSnapshot) {
    Result<SnapshotRecord> r = DecodeSnapshotRecord(plain_.data(), plain_.size());
    if (!r.ok()) {
      report_.problems.push_back("snapshot record in pack " + where + ": " + r.status().message());
    } else if (r->repository_id != repo_.config().id) {
      report_.problems.push_back("snapshot record in pack " + where +
                                 " belongs to another repository; left out");
    } else {
      max_id_ = std::max(max_id_, r->info.id);
      seen_ids_.insert(r->info.id);
      sealed_.push_back(Sealed{id, read.digest, where, *r});
    }
  } else if (read.kind == RecordKind::kHead) {
    // The newest head is the catalog's head again (head.h). Two heads with one counter (a
    // command killed before its commit, then another): the later sealed write time, then the
    // larger digest; never the pack order, which follows mtimes a copy may not keep.
    Result<HeadRecord> r = DecodeHeadRecord(plain_.data(), plain_.size());
    if (r.ok() && r->repository_id == repo_.config().id &&
        (!head_ ||
         std::tie(r->counter, r->written_unix_ms, read.digest) >
             std::tie(head_->first.counter, head_->first.written_unix_ms, head_->second))) {
      head_.emplace(std::move(*r), read.digest);
    }
  } else if (read.kind == RecordKind::kForget) {
    Result<ForgetRecord> r = DecodeForgetRecord(plain_.data(), plain_.size());
    if (!r.ok()) {
      report_.problems.push_back("forget record in pack " + where + ": " + r.status().message());
    } else if (r->repository_id != repo_.config().id) {
      report_.problems.push_back("forget record in pack " + where +
                                 " belongs to another repository; left out");
    } else {
      for (const ForgottenSnapshot& f : r->snapshots) {
        forgotten_.insert(f.record);
        max_id_ = std::max(max_id_, f.id);
        seen_ids_.insert(f.id);
      }
    }
  }
}

Status Rebuilder::AddReader(const std::string& name, PrefetchedReader** ahead) {
  if (prefetch_) {
    WB_ASSIGN_OR_RETURN(std::unique_ptr<PrefetchedReader> taken, prefetch_->Take(name));
    *ahead = taken.get();
    readers_.push_back(std::move(taken));
    return Status::Ok();
  }
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> opened, OpenPack(name));
  readers_.push_back(std::move(opened));
  return Status::Ok();
}

// A pack whose header does not check (`why`): left out, or the reason for a full rebuild when
// the catalog indexes records of it.
Status Rebuilder::LeaveOut(const PackFile& pack, int64_t known_id, const PackReader& reader,
                           const Status& why) {
  // On S3 the header is the pack's first request (opening sends none): a store that does not
  // answer, refused keys or an interrupt stop the rebuild, they do not leave packs out.
  if (repo_.remote() && why.code() != StatusCode::kCorruption) return why;
  if (known_id != 0) {  // the catalog indexes records of it: a full rebuild leaves them out
    needs_full_ = true;
    needs_full_why_ = why.message();
    return Status::Ok();
  }
  report_.problems.push_back(why.message() + "; left out");
  // Not what a failed read says, nor a pack the listing named and the store then did not have
  // (it is read again next time): only a pack that is there and is not one of ours.
  if (options_.cache && why.code() == StatusCode::kCorruption && reader.Size().ok())
    examined_[pack.name] = pack.size;
  bytes_done_ += pack.size;
  return Status::Ok();
}

Status Rebuilder::IndexPack(const PackFile& pack, int64_t known_id, uint64_t from) {
  const std::string path = repo_.packs().Describe(pack.name);
  PrefetchedReader* ahead = nullptr;  // its headers read ahead (StartReading)
  WB_RETURN_IF_ERROR(AddReader(pack.name, &ahead));
  const ForgetAhead forget(ahead);  // on every way out of the walk
  const PackReader& reader = *readers_.back();
  if (Status s = CheckPackHeader(reader, repo_.config().id, path); !s.ok()) {
    return LeaveOut(pack, known_id, reader, s);
  }
  int64_t pack_id = known_id;
  if (pack_id == 0) {
    WB_ASSIGN_OR_RETURN(pack_id, catalog_->AddPack(pack.name));
  } else {
    ++report_.packs_grown;
  }
  ++report_.packs;
  uint64_t offset = from;
  uint64_t end = from;  // after the last whole record
  while (offset + kRecordHeaderSize <= pack.size) {
    uint8_t bytes[kRecordHeaderSize];
    WB_RETURN_IF_ERROR(reader.ReadAt(offset, bytes, sizeof bytes));
    Result<RecordHeader> h = ParseRecordHeader(bytes);
    const bool fits = h.ok() && offset + kRecordHeaderSize + h->stored_size <= pack.size;
    bool whole = false;
    if (fits) {
      WB_ASSIGN_OR_RETURN(whole, IndexRecord(pack, reader, pack_id, offset, *h));
    }
    if (whole) {
      offset += kRecordHeaderSize + h->stored_size;
      end = offset;
    } else {
      // A damaged or forged header: its sizes lead nowhere. Go on at the next header; none
      // after it means a record that was being written when a run was interrupted.
      const uint64_t next = NextHeader(reader, offset + 1, pack.size);
      if (next < pack.size && !fits) {
        ++report_.damaged_records;
        report_.problems.push_back("unreadable bytes in pack " + pack.name + " at " +
                                   std::to_string(offset) + "; skipped to the next record at " +
                                   std::to_string(next));
      }
      offset = next;
    }
    if (options_.on_progress) options_.on_progress(bytes_done_ + offset, bytes_total_);
  }
  offset = end;
  // What follows the last whole record was being written when a run was interrupted.
  report_.torn_bytes += pack.size - offset;
  if (options_.cache && offset < pack.size) examined_[pack.name] = pack.size;
  bytes_done_ += pack.size;
  return catalog_->SetPackSize(pack_id, offset);
}

Result<std::vector<Digest>> Rebuilder::LoadSegment(const Digest& digest) {
  auto it = segments_.find(digest);
  if (it != segments_.end()) {
    const RecordLocation& l = it->second;
    WB_ASSIGN_OR_RETURN(RecordHeader h, ReadRecordAt(*l.pack, l.offset, l.stored_size, &record_));
    plain_.resize(h.raw_size);
    WB_RETURN_IF_ERROR(codec_.Open(h, record_.data() + kRecordHeaderSize, plain_.data()));
    return DecodeMapSegment(plain_.data(), plain_.size());
  }
  // An incremental refresh: a segment the catalog indexed before (a snapshot of an unchanged
  // source seals the same segments again, and a copy is indexed once).
  std::optional<int64_t> row;
  if (!indexed_names_.empty()) {
    WB_ASSIGN_OR_RETURN(row, catalog_->FindChunk(digest));
  }
  if (!row) return Status::NotFound("a map segment is missing from the packs");
  WB_ASSIGN_OR_RETURN(const catalog::ChunkRecord c, catalog_->GetChunk(*row));
  WB_RETURN_IF_ERROR(ReadIndexed(c, RecordKind::kMapSegment, kMaxMapSegmentSize));
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
                               " of its chunks are missing from the packs (put back a pack that "
                               "is only away and repair again; if they are gone for good, "
                               "'wanbackup forget --lost " +
                               std::to_string(info.id) + "' gives it up)");
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

Status Rebuilder::CheckNoneMissing(const std::vector<PackFile>& packs) const {
  struct stat st {};
  const bool has_catalog = ::lstat(repo_.CatalogPath().c_str(), &st) == 0;
  std::optional<std::vector<catalog::PackInfo>> named;  // what a readable old catalog names
  if (has_catalog) {
    if (Result<std::unique_ptr<catalog::Catalog>> old = catalog::Catalog::Peek(repo_.CatalogPath());
        old.ok()) {
      if (Result<std::vector<catalog::PackInfo>> listed = (*old)->Packs(); listed.ok()) {
        named = std::move(*listed);
      }
    }
  }
  if (named) {  // the old catalog can still be read: what it names must be there
    std::set<std::string> there;
    for (const PackFile& p : packs)
      there.insert(p.name);
    std::vector<std::string> missing;
    for (const catalog::PackInfo& p : *named) {
      if (there.count(p.name) == 0) missing.push_back(p.name);
    }
    if (missing.empty()) return Status::Ok();
    return Status::Corruption(
        "the catalog names " + std::to_string(missing.size()) + " of its " +
        std::to_string(named->size()) + " packs that are not in the repository (" +
        repo_.packs().Describe(missing.front()) + (missing.size() > 1 ? ", ..." : "") +
        "): is the disk that holds them not mounted, or something mounted over packs/? Nothing "
        "was changed. To rebuild from the packs that are there, losing what only the missing "
        "ones hold: 'wanbackup repair catalog --allow-missing-packs'");
  }
  if (!packs.empty()) return Status::Ok();  // too damaged to tell: the packs are all there is
  // Not one pack, and the old catalog damaged or gone: a repository that had a catalog, or that
  // this client saw a head of, had packs; an empty packs/ is a disk that is not mounted yet far
  // more often than a repository that lost everything.
  const Result<std::optional<AnchorRecord>> anchor =
      TrustAnchorStore(DefaultSecurityDir()).Load(repo_.config().id);
  const uint64_t seen = anchor.ok() && *anchor ? (*anchor)->head_counter : 0;
  if (!has_catalog && seen == 0) return Status::Ok();
  return Status::Corruption(
      "there is no pack at all in the repository, though " +
      (has_catalog ? std::string("it has a catalog")
                   : "this client saw its head " + std::to_string(seen)) +
      ": is the disk that holds packs/ not mounted, or something mounted over it? Nothing was "
      "changed. To rebuild an empty catalog all the same: 'wanbackup repair catalog "
      "--allow-missing-packs'");
}

// What the old catalog names, or recorded as missing, that is not among `packs`.
std::vector<std::string> Rebuilder::MissingPacks(const std::vector<PackFile>& packs) {
  Result<std::unique_ptr<catalog::Catalog>> old = catalog::Catalog::Peek(repo_.CatalogPath());
  if (!old.ok()) return {};
  std::set<std::string> wanted;
  if (Result<std::vector<catalog::PackInfo>> named = (*old)->Packs(); named.ok()) {
    for (const catalog::PackInfo& p : *named)
      wanted.insert(p.name);
  }
  if (Result<std::string> recorded = (*old)->GetSetting(catalog::kMissingPacks); recorded.ok()) {
    std::istringstream names(*recorded);
    for (std::string name; names >> name;)
      wanted.insert(name);
  }
  if (Result<std::string> recorded = (*old)->GetSetting(catalog::kMissingRecords); recorded.ok()) {
    std::istringstream entries(*recorded);
    for (std::string entry; entries >> entry;)
      old_missing_records_.push_back(entry);
  }
  for (const PackFile& p : packs)
    wanted.erase(p.name);
  return {wanted.begin(), wanted.end()};
}

// Sealed snapshot records known of but not in the packs (catalog::kMissingRecords): what the
// old catalog recorded, what the newest head listed, and the highest number this client saw;
// less what the packs hold or a forget record names.
std::vector<std::string> Rebuilder::MissingRecords() const {
  std::set<std::string> entries(old_missing_records_.begin(), old_missing_records_.end());
  std::set<Digest> present;
  for (const Sealed& s : sealed_)
    present.insert(s.digest);
  for (const HeadEntry& e : lost_entries_) {
    if (present.count(e.record) == 0) {
      entries.insert(std::to_string(e.id) + ":" + ToHex(e.record.data(), e.record.size()));
    }
  }
  const Result<std::optional<AnchorRecord>> anchor =
      TrustAnchorStore(DefaultSecurityDir()).Load(repo_.config().id);
  if (anchor.ok() && *anchor && (*anchor)->highest_snapshot != 0 &&
      (*anchor)->highest_snapshot < static_cast<uint64_t>(catalog::kMaxSnapshotId)) {
    entries.insert(std::to_string((*anchor)->highest_snapshot) + ":");
  }
  std::vector<std::string> missing;
  for (const std::string& entry : entries) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::string hex = entry.substr(colon + 1);
    bool found = false;
    if (hex.empty()) {  // by number: any sealed or forget record that has it
      const std::optional<uint64_t> id = ParseDecimalU64(entry.substr(0, colon));
      found = !id || seen_ids_.count(static_cast<int64_t>(*id)) != 0;
    } else {
      found = std::any_of(present.begin(), present.end(),
                          [&](const Digest& d) { return ToHex(d.data(), d.size()) == hex; }) ||
              std::any_of(forgotten_.begin(), forgotten_.end(),
                          [&](const Digest& d) { return ToHex(d.data(), d.size()) == hex; });
    }
    if (!found) missing.push_back(entry);
  }
  return missing;
}

Result<RebuildReport> Rebuilder::Run() {
  const std::string built = repo_.CatalogPath() + ".rebuilding";
  for (const char* suffix : {"", "-wal", "-shm"})
    ::unlink((built + suffix).c_str());
  // Oldest first: the order records were written, so the first copy of a duplicated record is
  // the one an earlier catalog named.
  WB_ASSIGN_OR_RETURN(std::vector<PackFile> packs, repo_.packs().List());
  if (!options_.allow_missing_packs && !options_.cache) {
    WB_RETURN_IF_ERROR(CheckNoneMissing(packs));
  }
  if (!options_.cache) report_.missing_packs = MissingPacks(packs);
  for (const PackFile& p : packs)
    bytes_total_ += p.size;
  {
    // Made here, new and 0600, before SQLite opens it: never an existing file or a link.
    const UniqueFd made(
        ::open(built.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!made.valid()) return Status::FromErrno(errno, "creating " + built);
    WB_ASSIGN_OR_RETURN(catalog_, catalog::Catalog::Open(built, true));
    WB_ASSIGN_OR_RETURN(auto txn, catalog_->Begin());
    std::vector<HeaderPrefetch::Job> jobs;
    for (const PackFile& p : packs)
      jobs.push_back({p.name, p.size, kPackHeaderSize});
    StartReading(std::move(jobs));
    for (const PackFile& p : packs)
      WB_RETURN_IF_ERROR(IndexPack(p));
    prefetch_.reset();
    std::vector<HeadEntry> rebuilt;
    WB_RETURN_IF_ERROR(RebuildSnapshots(&rebuilt));
    // New snapshots get ids above every id ever used, forgotten ones included.
    WB_RETURN_IF_ERROR(catalog_->PutSetting(catalog::kSnapshotIdFloor, std::to_string(max_id_)));
    WB_RETURN_IF_ERROR(SettleHead(rebuilt));
    WB_RETURN_IF_ERROR(NoteExamined());
    if (!options_.cache) {
      report_.missing_records = MissingRecords();
      for (const auto& [key, list] :
           {std::pair{catalog::kMissingPacks, &report_.missing_packs},
            std::pair{catalog::kMissingRecords, &report_.missing_records}}) {
        std::string joined;
        for (const std::string& item : *list)
          joined += (joined.empty() ? "" : " ") + item;
        if (!joined.empty()) WB_RETURN_IF_ERROR(catalog_->PutSetting(key, joined));
      }
    }
    WB_RETURN_IF_ERROR(txn->Commit());
    WB_RETURN_IF_ERROR(repo_.WriteSettings(catalog_.get()));
    catalog_.reset();  // closes it: the WAL is folded into the file
  }
  if (options_.cache) {
    WB_RETURN_IF_ERROR(repo_.InstallCacheCatalog(built));
    return Report();
  }
  WB_RETURN_IF_ERROR(repo_.InstallCatalog(built, &report_.old_catalog));
  if (report_.new_head) repo_.HeadCommitted(report_.head_counter);
  return Report();
}

bool Rebuilder::Listed(const HeadEntry& e) const {
  return head_ && std::find(head_->first.snapshots.begin(), head_->first.snapshots.end(), e) !=
                      head_->first.snapshots.end();
}

// Which sealed snapshots come back (docs/format.md, "Rebuilding the catalog"): the newest head
// decides over forget records, so a forget record applies only to snapshots that head does not
// list (a forget killed before its commit, then another command, leaves a record the committed
// head overrules). A complete snapshot neither listed nor forgotten (sealed by a wanbackup
// before heads, or killed before its commit) is kept: SettleHead seals a head listing it.
Status Rebuilder::RebuildSnapshots(std::vector<HeadEntry>* rebuilt) {
  std::map<int64_t, const Sealed*> by_id;
  std::vector<const Sealed*> renumber;
  for (const Sealed& s : sealed_) {
    const HeadEntry entry{s.record.info.id, s.digest};
    // A cache follows the newest head alone: what it does not list is 'repair catalog''s.
    if (options_.cache && head_ && !Listed(entry)) continue;
    if (!Listed(entry) && forgotten_.count(s.digest) != 0) {
      report_.forgotten.push_back(entry.id);
      continue;
    }
    const auto [kept, first] = by_id.emplace(entry.id, &s);
    if (first) continue;
    // Two sealed records under one number: a copy (a prune killed after it copied), or two
    // snapshots that a catalog behind its packs numbered alike (round 6, W2). The one the
    // newest head lists is the set as it was last left; otherwise the first written.
    const Sealed* left_out = &s;
    if (Listed(entry) && !Listed(HeadEntry{entry.id, kept->second->digest})) {
      left_out = kept->second;
      kept->second = &s;
    }
    // Two snapshots: the other one gets a number of its own (round 7, X1). A cache only
    // follows the head; `repair catalog` renumbers.
    if (left_out->digest != kept->second->digest && !options_.cache &&
        max_id_ < catalog::kMaxSnapshotId) {
      renumber.push_back(left_out);
      continue;
    }
    const auto& other = left_out->record.info;
    report_.problems.push_back(
        "snapshot " + std::to_string(entry.id) + " is sealed twice" +
        (left_out->digest == kept->second->digest ? "" : ", as two different snapshots") +
        "; the one in pack " + left_out->where + " (of " + EscapeForTerminal(other.source) +
        ", taken " + LocalTime(other.started_unix_ms) + ") is left out");
  }
  for (const auto& [id, s] : by_id) {
    const size_t before = report_.snapshots.size();
    WB_RETURN_IF_ERROR(AddSnapshot(s->row, s->record));
    if (report_.snapshots.size() == before) continue;
    const HeadEntry entry{id, s->digest};
    rebuilt->push_back(entry);
    if (head_ && !Listed(entry)) report_.unlisted.push_back(id);
  }
  for (const Sealed* s : renumber)
    WB_RETURN_IF_ERROR(Renumber(*s, rebuilt));
  return Status::Ok();
}

// Seals each (kind, plaintext) into one new pack, makes it durable and indexes the records in
// the new catalog (in its transaction, which commits after).
Result<std::vector<Rebuilder::SealedRow>> Rebuilder::AppendRecords(
    const std::vector<std::pair<RecordKind, std::string>>& records) {
  RecordCodec codec(repo_.keys(), repo_.config().zstd_level);
  std::string name;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack, repo_.NewPackFile(&name));
  std::vector<std::vector<uint8_t>> sealed(records.size());
  std::vector<SealedRow> rows(records.size());
  std::vector<uint64_t> offsets(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string& plain = records[i].second;
    rows[i].digest = codec.SealWhole(reinterpret_cast<const uint8_t*>(plain.data()), plain.size(),
                                     records[i].first, &sealed[i]);
    WB_ASSIGN_OR_RETURN(offsets[i], pack->Append(sealed[i].data(), sealed[i].size()));
  }
  WB_RETURN_IF_ERROR(pack->Sync());
  WB_ASSIGN_OR_RETURN(const int64_t pack_id, catalog_->AddPack(name));
  WB_RETURN_IF_ERROR(catalog_->SetPackSize(pack_id, pack->size()));
  for (size_t i = 0; i < records.size(); ++i) {
    catalog::ChunkRecord c;
    c.kind = static_cast<catalog::ChunkKind>(records[i].first);
    c.digest = rows[i].digest;
    c.pack_id = pack_id;
    c.offset = offsets[i];
    c.stored_size = static_cast<uint32_t>(sealed[i].size() - kRecordHeaderSize);
    c.raw_size = static_cast<uint32_t>(records[i].second.size());
    WB_ASSIGN_OR_RETURN(rows[i].row, catalog_->AddChunk(c));
  }
  return rows;
}

// Seals `s` again as a new snapshot above every number in the packs, with a forget record for
// the old record (so that prune may drop it, and a later rebuild leaves it out), both in a pack
// of their own made durable before the catalog commits; the snapshot is rebuilt under its new
// number. Its chunks and map segments are the old record's.
Status Rebuilder::Renumber(const Sealed& s, std::vector<HeadEntry>* rebuilt) {
  SnapshotRecord moved = s.record;
  moved.info.id = ++max_id_;
  WB_ASSIGN_OR_RETURN(const std::string plain, EncodeSnapshotRecord(moved));
  ForgetRecord old;
  old.repository_id = repo_.config().id;
  old.forgotten_unix_ms = NowUnixMs();
  old.snapshots.push_back(ForgottenSnapshot{s.record.info.id, s.digest});
  WB_ASSIGN_OR_RETURN(const std::vector<SealedRow> rows,
                      AppendRecords({{RecordKind::kSnapshot, plain},
                                     {RecordKind::kForget, EncodeForgetRecord(old)}}));
  const Digest& record_digest = rows[0].digest;
  const int64_t record_row = rows[0].row;
  const size_t before = report_.snapshots.size();
  WB_RETURN_IF_ERROR(AddSnapshot(record_row, moved));
  const catalog::SnapshotInfo& info = moved.info;
  if (report_.snapshots.size() == before) return Status::Ok();  // its chunks are missing: said
  rebuilt->push_back(HeadEntry{info.id, record_digest});
  report_.renumbered.push_back("snapshot " + std::to_string(s.record.info.id) + " of " +
                               EscapeForTerminal(info.source) + " taken " +
                               LocalTime(info.started_unix_ms) +
                               " shared its number with another snapshot; it is snapshot " +
                               std::to_string(info.id) + " from now on");
  return Status::Ok();
}

Status Rebuilder::SettleHead(const std::vector<HeadEntry>& rebuilt) {
  if (!head_) return Status::Ok();  // made before heads: the next writing command seals one
  const HeadRecord& newest = head_->first;
  report_.head_counter = newest.counter;
  if (rebuilt == newest.snapshots) return RecordHead(*catalog_, newest, head_->second);
  for (const HeadEntry& e : newest.snapshots) {
    if (std::find(rebuilt.begin(), rebuilt.end(), e) == rebuilt.end()) {
      report_.lost.push_back(e.id);
      lost_entries_.push_back(e);
    }
  }
  if (options_.cache && report_.lost.empty()) {  // more than the head lists (a refresh's rows)
    return Status::Corruption(
        "the catalog cache cannot be refreshed: it lists snapshots the repository's newest head "
        "does not; 'wanbackup repair catalog --repo " +
        repo_.path() + "' rebuilds it");
  }
  if (options_.cache) {
    return Status::Corruption(
        "the catalog cache cannot be rebuilt: the repository's newest head lists snapshot " +
        std::to_string(report_.lost.front()) +
        (report_.lost.size() > 1 ? " and " + std::to_string(report_.lost.size() - 1) + " more"
                                 : "") +
        " that cannot be rebuilt from the packs (" +
        (report_.problems.empty() ? std::string("missing") : report_.problems.front()) +
        "); 'wanbackup repair catalog --repo " + repo_.path() + "' says what is lost");
  }
  // The newest head has the highest counter in the packs (NoteSealed): one above it, so that
  // no head in the packs outranks what was rebuilt.
  if (newest.counter == UINT64_MAX) {
    return Status::Corruption("the repository's head counter cannot grow any further");
  }
  const SealedHead head = SealHead(repo_, rebuilt, newest.counter + 1);
  WB_RETURN_IF_ERROR(WriteHead(head));
  report_.head_counter = head.record.counter;
  report_.new_head = true;
  return Status::Ok();
}

// Appends `head` to a pack of its own, makes it durable, and indexes it in the new catalog as
// its newest head.
Status Rebuilder::WriteHead(const SealedHead& head) {
  std::string name;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack, repo_.NewPackFile(&name));
  WB_ASSIGN_OR_RETURN(const uint64_t offset, pack->Append(head.bytes.data(), head.bytes.size()));
  WB_RETURN_IF_ERROR(pack->Sync());
  WB_ASSIGN_OR_RETURN(const int64_t pack_id, catalog_->AddPack(name));
  WB_RETURN_IF_ERROR(catalog_->SetPackSize(pack_id, pack->size()));
  return IndexHead(*catalog_, head, pack_id, offset);
}

}  // namespace internal

Result<RebuildReport> RebuildCatalog(Repository& repo, const RebuildOptions& options) {
  internal::Rebuilder r(repo, options);
  return r.Run();
}

}  // namespace wanbackup::pipeline
