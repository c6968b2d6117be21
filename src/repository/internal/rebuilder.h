// The machinery behind RebuildCatalog (catalog_rebuild.h) and RefreshCacheCatalog
// (cache_refresh.h): indexing the records of packs into a catalog, and bringing back the
// snapshots the newest head lists. A full rebuild indexes every pack into a new catalog
// (catalog_rebuild.cpp); an incremental refresh indexes only the packs a cache lacks, and the
// tails of packs that grew, into the cache's own catalog (cache_refresh.cpp). One class, so that
// both index records and judge snapshots with the same code.
//
// Runs on the calling thread, and everything it indexes is indexed there, in pack order; on
// object storage, worker threads read the next packs' record headers ahead (header_prefetch.h).
// One Rebuilder per run.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/cache_refresh.h"
#include "repository/catalog_rebuild.h"
#include "repository/head.h"
#include "repository/internal/header_prefetch.h"
#include "repository/record.h"
#include "repository/repository.h"
#include "repository/snapshot_record.h"
#include "store/pack.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline::internal {

using PackFile = StoredPack;

struct RecordLocation {
  const PackReader* pack = nullptr;
  uint64_t offset = 0;
  uint32_t stored_size = 0;
};

class Rebuilder {
 public:
  Rebuilder(Repository& repo, const RebuildOptions& options)
      : repo_(repo), options_(options), codec_(repo.keys(), 0) {}

  // The full rebuild (catalog_rebuild.cpp).
  Result<RebuildReport> Run();
  // The incremental refresh of an S3 repository's cache (cache_refresh.cpp): nullopt when the
  // cache turns out not to fit it (RefreshCacheCatalog rebuilds it whole then), with the reason
  // in *why.
  Result<std::optional<RebuildReport>> RunIncremental(const CacheRefreshPlan& plan,
                                                      std::string* why);

 private:
  // Corruption when the old catalog, if it can still be read, names packs not in `packs`.
  Status CheckNoneMissing(const std::vector<PackFile>& packs) const;
  std::vector<std::string> MissingPacks(const std::vector<PackFile>& packs);
  std::vector<std::string> MissingRecords() const;
  // On object storage, starts reading the record headers of `jobs` ahead: IndexPack must then
  // be called for exactly those packs, in that order. Elsewhere, does nothing.
  void StartReading(std::vector<HeaderPrefetch::Job> jobs);
  // report_ with what was read so far (RebuildReport::reads, bytes_read).
  const RebuildReport& Report();
  // Indexes the records of `pack` from `from` on. `known_id`: the pack's row in the catalog
  // already (a pack that grew since it was indexed up to `from`); 0: a new row.
  Status IndexPack(const PackFile& pack, int64_t known_id = 0, uint64_t from = kPackHeaderSize);
  Status LeaveOut(const PackFile& pack, int64_t known_id, const PackReader& reader,
                  const Status& why);
  // The store's reader of pack `name`, counting what is read through it (RebuildReport::reads).
  // Thread-safe (HeaderPrefetch's workers call it).
  Result<std::unique_ptr<PackReader>> OpenPack(const std::string& name);
  // Appends the reader IndexPack walks pack `name` with to readers_: the one its headers were
  // read ahead through (also in *ahead) when StartReading started, else a new one.
  Status AddReader(const std::string& name, PrefetchedReader** ahead);
  // A snapshot or forget record just indexed (its plaintext in plain_): remembered for later.
  void NoteSealed(const RecordHeader& read, int64_t id, const std::string& where);
  // Rebuilds the sealed snapshots that come back into the catalog; `rebuilt` lists them.
  Status RebuildSnapshots(std::vector<HeadEntry>* rebuilt);
  // Whether the newest head in the packs lists `e`.
  bool Listed(const HeadEntry& e) const;
  // Makes the catalog's head the newest in the packs, or, when it lists snapshots that were not
  // rebuilt, a new head listing `rebuilt` (catalog_rebuild.h, RebuildReport::lost).
  Status SettleHead(const std::vector<HeadEntry>& rebuilt);
  Status WriteHead(const SealedHead& head);
  // False when the record was damaged (reported): its header's size cannot be trusted then.
  Result<bool> IndexRecord(const PackFile& pack, const PackReader& reader, int64_t pack_id,
                           uint64_t offset, const RecordHeader& h);
  // A chunk record indexed from its header alone (RebuildOptions::cache).
  Result<bool> IndexChunkHeader(int64_t pack_id, uint64_t offset, const RecordHeader& h);
  Status AddSnapshot(int64_t record_id, const SnapshotRecord& r);
  // The map segment `digest`: one indexed by this run, else one the catalog already indexed.
  Result<std::vector<Digest>> LoadSegment(const Digest& digest);

  // A cache's rebuild or refresh (cache_refresh.cpp): adds examined_ to the catalog's
  // kCacheExaminedPacks.
  Status NoteExamined();

  // Incremental refresh (cache_refresh.cpp).
  // Sets *why when the last record the catalog indexes in grown pack `g` is not in the store's
  // pack where the catalog has it (the pack was replaced, not only appended to).
  Status CheckIndexedPart(const GrownPack& g, std::string* why);
  // The head the cache names, read from its pack: the newest until a new pack holds a newer one.
  // False when the cache names none.
  Result<bool> SeedHead();
  // Reads the record the catalog row `c` names into plain_, authenticated, of kind `kind`.
  Status ReadIndexed(const catalog::ChunkRecord& c, RecordKind kind, size_t max_raw);
  // The newest head's snapshots made the cache's: rows it does not list (or lists with another
  // record) go, rows it lists that the cache lacks are rebuilt from their sealed records.
  Status FollowHead(std::string* why);
  // The sealed record of a listed snapshot the cache lacks: one a new pack held, else one the
  // catalog indexes. nullopt when neither has it.
  Result<std::optional<std::pair<int64_t, SnapshotRecord>>> FindSealed(const HeadEntry& e);

  Repository& repo_;
  const RebuildOptions& options_;
  RecordCodec codec_;
  std::unique_ptr<catalog::Catalog> catalog_;
  RebuildReport report_;
  std::vector<std::unique_ptr<PackReader>> readers_;
  std::unordered_map<Digest, RecordLocation, DigestHash> segments_;
  struct Sealed {
    int64_t row = 0;  // the record's chunks row
    Digest digest{};  // the record's digest (what a forget record names)
    std::string where;
    SnapshotRecord record;
  };
  // A snapshot that shares its number with another, sealed again under a new one.
  Status Renumber(const Sealed& s, std::vector<HeadEntry>* rebuilt);
  struct SealedRow {
    Digest digest{};
    int64_t row = 0;  // its chunks row in the new catalog
  };
  Result<std::vector<SealedRow>> AppendRecords(
      const std::vector<std::pair<RecordKind, std::string>>& records);
  std::vector<Sealed> sealed_;                         // in pack order
  std::unordered_set<Digest, DigestHash> forgotten_;   // forget records' digests
  int64_t max_id_ = 0;                                 // largest snapshot id seen
  std::set<int64_t> seen_ids_;                         // of sealed and forget records
  std::vector<HeadEntry> lost_entries_;                // the newest head's, not rebuilt
  std::vector<std::string> old_missing_records_;       // the old catalog's kMissingRecords
  std::optional<std::pair<HeadRecord, Digest>> head_;  // the newest head seen
  std::vector<uint8_t> record_, plain_;
  uint64_t bytes_done_ = 0, bytes_total_ = 0;
  // Incremental refresh: readers of packs the catalog indexed before, by pack id, and the
  // names of those packs.
  std::unordered_map<int64_t, std::unique_ptr<PackReader>> indexed_readers_;
  std::unordered_map<int64_t, std::string> indexed_names_;
  // A cache's packs read to their end without being indexed to it (cache_refresh.h).
  ExaminedPacks examined_;
  bool needs_full_ = false;  // what IndexPack found makes the refresh a full rebuild
  std::string needs_full_why_;
  // What the pack readers read, from any thread: Report() copies it into report_.
  std::atomic<uint64_t> reads_{0}, bytes_read_{0};
  // Declared last: its workers (which use the members above) stop before the rest goes.
  std::unique_ptr<HeaderPrefetch> prefetch_;
};

}  // namespace wanbackup::pipeline::internal
