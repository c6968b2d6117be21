// Verifying a repository: every chunk is read from its pack, its header checked against the
// catalog, authenticated, decompressed and its digest recomputed; every snapshot's map must be
// whole. Damage is reported per snapshot as byte and LBA ranges, so an operator knows exactly
// what a restore would lose. Runs on the calling thread plus one worker per core.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct DamagedRange {
  int64_t snapshot_id = 0;
  uint64_t offset = 0;  // bytes into the snapshot
  uint64_t length = 0;
  uint32_t block_size = 512;
  std::string reason;
};

struct VerifyReport {
  uint64_t snapshots_checked = 0;
  uint64_t chunks_checked = 0;
  uint64_t bytes_checked = 0;  // stored bytes read from packs
  uint64_t chunks_damaged = 0;
  std::vector<DamagedRange> damage;
  bool ok() const { return chunks_damaged == 0 && damage.empty(); }
};

struct VerifyOptions {
  std::optional<int64_t> snapshot_id;  // only this snapshot and its chunks; else everything
  // With share_of > 1 (and no snapshot_id): only the chunks whose id modulo share_of is
  // share_part, so N runs with parts 0..N-1 read every chunk once (`wanbackup run`'s
  // verify_share). Every snapshot's map and sealed record are still checked.
  uint32_t share_part = 0;
  uint32_t share_of = 1;
  int workers = 0;  // 0: one per core
  std::function<void(uint64_t chunks_done, uint64_t chunks_total)> on_progress;
};

Result<VerifyReport> VerifyRepository(Repository& repo, const VerifyOptions& options);

}  // namespace wanbackup::pipeline
