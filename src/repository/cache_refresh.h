// Refreshing an S3 repository's catalog cache when the bucket holds what the cache lacks
// (docs/format.md, "A repository on S3"). When the bucket only gained packs, or packs the cache
// indexes only grew (uploaded again, longer: earlier versions put a new pack up with its header
// alone, then whole; a pack now appears once, whole), the new packs and the new tails are indexed
// into the cache's catalog, and the snapshots are made those the newest head lists, by the rules of
// the full cache rebuild (catalog_rebuild.h, RebuildOptions::cache): reads proportional to what is
// new, not to the repository. Anything else (a pack gone or smaller, a cache that names no head, a
// grown pack whose header no longer fits or whose last indexed record is not where the cache has
// it, a head that lists what cannot be rebuilt) rebuilds the cache whole, as before.
//
// PlanCacheRefresh is a pure function; RefreshCacheCatalog runs on the calling thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/result.h"
#include "repository/catalog_rebuild.h"
#include "repository/repository.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline {

// A pack the cache indexes that is larger in the store now.
struct GrownPack {
  int64_t id = 0;           // its row in the cache's catalog
  uint64_t known_size = 0;  // what the catalog indexes of it (the end of its last whole record)
  StoredPack pack;          // as the store lists it now
};

struct CacheRefreshPlan {
  enum class Kind {
    kFresh,        // the cache names every pack the store holds, none of them larger
    kIncremental,  // the store only gained packs, or packs grew: `added` and `grown`
    kFull,         // rebuild the cache whole: `why` says what does not fit
  };
  Kind kind = Kind::kFresh;
  std::vector<StoredPack> added;  // in the store's order (oldest first)
  std::vector<GrownPack> grown;
  std::string why;
};

// Packs a refresh or rebuild read to their end without indexing them to it, by name, with the
// size it read: a pack left out (its header does not check) or whose last record is damaged.
// The catalog cannot say so (its pack row, if any, ends at the last whole record, which prune
// relies on), so the cache keeps them in a setting of its own (kCacheExaminedPacks, "NAME:SIZE"
// separated by spaces); the plan takes such a pack as it is as long as it keeps that size, so
// that it is not read again on every open, nor gets every writer that starts beside another
// command on the host refused (exit 7: the cache would look stale to it).
using ExaminedPacks = std::map<std::string, uint64_t>;
inline constexpr const char kCacheExaminedPacks[] = "cache_examined_packs";
ExaminedPacks ParseExaminedPacks(const std::string& setting);
std::string FormatExaminedPacks(const ExaminedPacks& packs);

// What a cache whose catalog names `known` must do to follow a store that lists `stored`;
// `examined`: packs read before as far as the store has them (not new, not grown).
CacheRefreshPlan PlanCacheRefresh(const std::vector<catalog::PackInfo>& known,
                                  const std::vector<StoredPack>& stored,
                                  const ExaminedPacks& examined = {});

// Carries `plan` out (kIncremental, falling back to a full rebuild when the cache does not fit
// it; kFull: a full rebuild, RebuildCatalog with RebuildOptions::cache). Crash-safe: a kill
// leaves the old cache or the new one (cache_refresh.cpp says how). REQUIRES: repo.remote(), the
// cache's refresh lock held exclusively, the repository's catalog closed.
Result<RebuildReport> RefreshCacheCatalog(Repository& repo, const CacheRefreshPlan& plan);

// One line for the user: what the refresh read, and how.
std::string DescribeCacheRefresh(const RebuildReport& report);

}  // namespace wanbackup::pipeline
