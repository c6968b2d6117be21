// Where a repository's packs are kept: the one seam between the repository and its storage.
// A store writes new packs, reads byte ranges of packs, lists them and removes whole packs; it
// never modifies a pack once written, so packs can live on immutable object storage (an
// S3-compatible store would upload a pack as one object when it is synced for the last time).
// Prune follows the same rule: it writes new packs and removes whole old ones
// (docs/durability.md).
//
// LocalPackStore: the repository directory, packs/ab/abcdef….pack (docs/format.md), with
// fsynced directories so a pack's name is as durable as its data. Thread-safe: Open, List and
// readers from any thread; a PackWriter belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/pack.h"

namespace wanbackup::pipeline {

struct StoredPack {
  std::string name;  // 32 hex digits
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // when it was written (orders packs for a catalog rebuild)
};

class PackStore {
 public:
  virtual ~PackStore() = default;
  // A new pack named `name` with its header written. In a directory its name is durable before
  // this returns; on object storage the pack appears whole at its first Sync (until then a
  // killed run leaves nothing behind).
  virtual Result<std::unique_ptr<PackWriter>> Create(const std::string& name,
                                                     const std::string& repository_id) = 0;
  // Corruption when the pack is missing (the catalog names it): from Open in a directory, from
  // the first read on object storage (where opening costs no request).
  virtual Result<std::unique_ptr<PackReader>> Open(const std::string& name) = 0;
  // Every pack in the store, oldest first.
  virtual Result<std::vector<StoredPack>> List() = 0;
  // Removes a whole pack, durably. A pack that is already gone is not an error.
  virtual Status Remove(const std::string& name) = 0;
  // Abandons the writes of packs that were begun and never finished, which List does not show
  // and which still take space (on S3: the multipart upload of a killed run, whose parts the
  // service keeps until it is aborted); returns how many. REQUIRES: no other process writes
  // packs (prune's exclusive lock): a running writer's upload would be abandoned too.
  virtual Result<size_t> AbandonUnfinished() = 0;
  // Where a pack is, for messages.
  virtual std::string Describe(const std::string& name) const = 0;
};

std::unique_ptr<PackStore> NewLocalPackStore(const std::string& packs_dir);

// True when `file` is a pack's name, "<32 hex digits>.pack"; the name without ".pack" in *name.
bool IsPackFileName(const std::string& file, std::string* name);

}  // namespace wanbackup::pipeline
