// Restoring a snapshot to a BlockSink (file, block device or standard output).
//
// The calling thread reads the snapshot's sealed record and its map segments (snapshot_record.h)
// a segment at a time and finds where each chunk lies through the catalog, used only as an index
// by digest: each record read must open under the AEAD as the digest the sealed map names at
// that offset, so a catalog altered at any moment cannot place data wrongly. Worker threads (one
// per core) read each record from its pack, authenticate, decompress and check its digest, and
// write it at its offset (positioned sinks may be written by several threads at once). All-zero
// chunks become holes when the sink gets zeros for free (a new file) and are written as zeros
// otherwise (a block device). A sink that needs order (a pipe) is written in order, the workers
// taking turns. A damaged chunk stops the restore with the range it covers: nothing is ever
// silently replaced.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "common/block_io.h"
#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

struct RestoreProgress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  std::chrono::nanoseconds elapsed{0};
};

struct RestoreOptions {
  int workers = 0;  // 0: one per core (16 on object storage, where they wait on GETs)
  // The caller already ran CheckSnapshotAgainstRecord(..., true) (snapshot_check.h) before
  // opening the sink; else RestoreSnapshot runs it before writing anything.
  bool record_checked = false;
  std::chrono::milliseconds progress_interval{500};
  std::function<void(const RestoreProgress&)> on_progress;  // called on the calling thread
};

struct RestoreResult {
  uint64_t bytes = 0;
  uint64_t zero_bytes = 0;      // all-zero chunks (holes or written zeros)
  uint64_t bytes_written = 0;   // handed to the sink (holes and unselected chunks are not)
  uint64_t chunks_written = 0;  // the same, in chunks
  std::chrono::nanoseconds elapsed{0};
};

// Checks the snapshot against its sealed record, then writes every chunk of `snapshot` to `sink`
// and finishes it (fsync, final size).
Result<RestoreResult> RestoreSnapshot(Repository& repo, const catalog::SnapshotInfo& snapshot,
                                      BlockSink& sink, const RestoreOptions& options);

// Which chunks of a sealed map segment to write: called on the calling thread for each segment
// in order with the sealed digests (kZeroChunkDigest for zeros), it sizes `write` like `digests`
// and sets write[k] for each chunk first + k to be written.
using ChunkSelector = std::function<Status(uint64_t first, const std::vector<Digest>& digests,
                                           std::vector<bool>* write)>;

// RestoreSnapshot that writes only the chunks `select` picks (every chunk when it is empty), then
// finishes the sink. For replicate, which knows what the destination already holds.
Result<RestoreResult> RestoreSelected(Repository& repo, const catalog::SnapshotInfo& snapshot,
                                      BlockSink& sink, const RestoreOptions& options,
                                      const ChunkSelector& select);

// Reads chunks first .. first + digests.size() - 1 of `snapshot` back from `source` and sets
// differs[k] for each that differs from its sealed digest (or zeros, for kZeroChunkDigest). A
// read that fails is an error, not a difference.
Status CompareSegment(Repository& repo, const catalog::SnapshotInfo& snapshot, BlockSource& source,
                      uint64_t first, const std::vector<Digest>& digests,
                      std::vector<bool>* differs);

// Reads `path` back and checks each chunk against the snapshot's sealed map (digest; zeros where
// the snapshot has zeros). Corruption names the first range that differs.
Status CheckRestored(Repository& repo, const catalog::SnapshotInfo& snapshot,
                     const std::string& path);
// The same, reading back from `source` (an iSCSI LUN through the WAN, say); Corruption names the
// source's range that differs.
Status CheckRestored(Repository& repo, const catalog::SnapshotInfo& snapshot, BlockSource& source);

}  // namespace wanbackup::pipeline
