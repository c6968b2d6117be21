// Taking a snapshot: the pipeline that reads a source into the repository.
//
//   reader thread    submits chunk-sized reads (LBA-aligned, last one short) to the BlockSource
//                    and passes completed chunks on; a chunk the source reports deallocated
//                    (a thin LUN's, BlockSource::DeallocatedRanges, asked ahead in windows:
//                    deallocation.h) is not read and becomes a zero chunk, as an all-zero
//                    chunk read from the source does
//   worker threads   (one per core) all-zero check and keyed BLAKE2b digest; then, for chunks the
//                    repository does not hold yet, zstd and XChaCha20-Poly1305 into a record
//   this thread      dedup (catalog + chunks in flight), appends records to the pack, records
//                    chunks and map segments in the catalog, and commits: pack fsync first, then
//                    the catalog transaction (docs/durability.md)
// Memory: a fixed pool of chunk buffers (and as many record buffers as workers) bounds it,
// whatever the source's size. An interrupted run leaves every committed chunk for the next run
// to reuse; its snapshot never becomes visible.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "catalog/catalog.h"
#include "common/block_io.h"
#include "common/result.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {

// CPU seconds per stage, summed over threads (for the benchmark's breakdown).
struct StageTimes {
  double zero = 0, digest = 0, dedup = 0, compress = 0, encrypt = 0, write = 0, catalog = 0;
};

struct SnapshotProgress {
  uint64_t bytes_done = 0;  // read and fully processed
  uint64_t bytes_total = 0;
  uint64_t bytes_new = 0;     // new chunk data (before compression)
  uint64_t bytes_stored = 0;  // added to packs
  std::chrono::nanoseconds elapsed{0};
  std::chrono::nanoseconds quiet{0};  // since the source last delivered data (a stalled link)
  SourceStats source;
};

inline constexpr size_t kMaxTagBytes = 256;

// A snapshot's tag: UTF-8, printable (no tab, newline or other control character), at most
// kMaxTagBytes, with no white space at either end and no character that shows as nothing (so it
// cannot read as another tag), and a name the mount view can show as a link: not ".", "..",
// "latest" or all digits, no "/". The error names what is wrong, not the flag or key it came from.
// Only tags being set are checked: snapshots recorded with any tag still list, restore and mount.
Status CheckTag(std::string_view tag);

// The checkpoint defaults (SnapshotOptions::commit_bytes, commit_interval). On object storage
// a checkpoint waits until every pack it names is uploaded, so the line runs dry at each one:
// they come less often there, and a killed run loses at most that much upload.
inline constexpr uint64_t kCheckpointBytes = 256ull << 20;
inline constexpr std::chrono::milliseconds kCheckpointInterval{10'000};
inline constexpr uint64_t kObjectCheckpointBytes = 4ull << 30;
inline constexpr std::chrono::milliseconds kObjectCheckpointInterval{60'000};
// 8 × 64 MiB, 512 MiB held: the store sends 6 of them at once (S3Options::parallel_uploads, 24
// parts of 16 MiB in flight) and the other 2 wait, ready, to go the moment one ends. Measured
// at 64 ms one-way against Ceph RGW when all went at once: 4 packs 58-63 MB/s, 8 packs 64-72,
// 12 packs 67; 8 MiB parts were slower (49-61), and 4 MiB parts slower again.
inline constexpr uint64_t kObjectUploadPacks = 8;

struct SnapshotOptions {
  std::string source_name;
  std::string tag;
  std::string job;                     // the config file's job that takes it, if any
  uint64_t max_memory = 256ull << 20;  // for chunk and record buffers
  int workers = 0;                     // 0: one per core
  uint64_t pack_size = 512ull << 20;   // start a new pack past this size
  // Checkpoints: commit at least this often (bytes stored) ... or this often (time); 0: the
  // store's default (kCheckpointBytes / kCheckpointInterval, kObject… on object storage).
  uint64_t commit_bytes = 0;
  std::chrono::milliseconds commit_interval{0};
  // Object storage: full packs uploading in the background at once, at most this many bytes
  // (memory: each is held until it is up; 0: kObjectUploadPacks packs; one pack is held
  // whatever it says). A checkpoint waits for all of them.
  uint64_t upload_bytes = 0;
  std::chrono::milliseconds progress_interval{500};
  std::function<void(const SnapshotProgress&)> on_progress;  // called on the calling thread
  // Tests only: the snapshot's start time instead of the clock's (its finish time keeps the real
  // duration). Retention tests use it to fake a month of snapshots in seconds.
  int64_t fake_start_unix_ms = 0;
};

struct SnapshotResult {
  catalog::SnapshotInfo info;
  StageTimes stages;
  std::chrono::nanoseconds elapsed{0};
  uint64_t peak_buffer_bytes = 0;
  // Object storage: the most bytes of full packs held at once while they were uploaded (within
  // SnapshotOptions::upload_bytes plus the pack that went over it); 0 on a directory.
  uint64_t peak_upload_bytes = 0;
  int abandoned_runs = 0;  // interrupted earlier runs found and closed
  SourceStats source;
  // Bytes of zero chunks the source reported deallocated, never read (not in info.bytes_read).
  uint64_t bytes_deallocated = 0;
};

// REQUIRES: `repo` opened for writing.
Result<SnapshotResult> TakeSnapshot(Repository& repo, BlockSource& source,
                                    const SnapshotOptions& options);

}  // namespace wanbackup::pipeline
