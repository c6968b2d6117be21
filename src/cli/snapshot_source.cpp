#include "cli/snapshot_source.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "cli/console.h"
#include "cli/source_open.h"
#include "common/units.h"
#include "initiator/autotune.h"

namespace wanbackup::cli {

namespace {

// The flags of the snapshot's checkpoints and uploads; unset, the store's defaults stay.
Status ApplyCheckpointAndUpload(const SnapshotRequest& request,
                                pipeline::SnapshotOptions& options) {
  if (!request.checkpoint_interval.empty()) {
    WB_ASSIGN_OR_RETURN(auto checkpoint, ParseDuration(request.checkpoint_interval, "s"));
    // 0 (a checkpoint after every record) stays what it always was; 0 in the options means
    // the store's default.
    options.commit_interval = std::max(std::chrono::milliseconds(1),
                                       std::chrono::ceil<std::chrono::milliseconds>(checkpoint));
  }
  if (!request.checkpoint_bytes.empty()) {
    WB_ASSIGN_OR_RETURN(const uint64_t bytes, ParseSize(request.checkpoint_bytes));
    options.commit_bytes = std::max<uint64_t>(1, bytes);
  }
  if (!request.upload_memory.empty()) {
    const Result<uint64_t> bytes = ParseSize(request.upload_memory);
    if (!bytes.ok() || *bytes == 0) {
      return Status::InvalidArgument(
          "--upload-memory takes a size above 0 such as 256M or 1G, not '" + request.upload_memory +
          "'");
    }
    options.upload_bytes = *bytes;
  }
  return Status::Ok();
}

}  // namespace

Status CheckSnapshotFlags(const SnapshotRequest& request) {
  pipeline::SnapshotOptions unused;
  return ApplyCheckpointAndUpload(request, unused);
}

Result<pipeline::SnapshotResult> SnapshotSource(pipeline::Repository& repo,
                                                const SnapshotRequest& request) {
  WB_ASSIGN_OR_RETURN(uint64_t max_memory, ParseSize(request.tuning.max_memory));
  // The snapshotter submits whole chunks; the reader splits each into READs of the planned size
  // (256 KiB, together one bandwidth-delay product in flight: see autotune.h).
  WB_ASSIGN_OR_RETURN(OpenedSource opened,
                      OpenSource(request.source, request.target, request.tuning));
  BlockSource& source = *opened.source;
  if (opened.remote)
    PrintInfo("reading " + source.geometry().name + ": " + opened.tuning_explanation);

  pipeline::SnapshotOptions options;
  options.source_name = source.geometry().name;
  options.tag = request.tag;
  options.job = request.job;
  // The pipeline's buffers are also the reader's window: the source reads into them.
  options.max_memory = initiator::BufferBudget(max_memory);
  options.progress_interval = request.progress_interval;
  options.on_progress = request.on_progress;
  WB_RETURN_IF_ERROR(ApplyCheckpointAndUpload(request, options));

  // Tests only (docs/testing.md): $WANBACKUP_TEST_PACK_SIZE closes packs at that size (on S3,
  // where they are 64 MiB, a small image then fills many, uploaded in the background).
  if (const char* pack = std::getenv("WANBACKUP_TEST_PACK_SIZE"); pack != nullptr && *pack) {
    WB_ASSIGN_OR_RETURN(options.pack_size, ParseSize(pack));
    if (options.pack_size == 0)
      return Status::InvalidArgument("$WANBACKUP_TEST_PACK_SIZE must be more than 0");
  }
  // Tests only (docs/testing.md): $WANBACKUP_TEST_SNAPSHOT_TIME, in Unix seconds, is recorded as
  // the snapshot's start time, so retention can be tested on a faked month of snapshots.
  if (const char* fake = std::getenv("WANBACKUP_TEST_SNAPSHOT_TIME"); fake != nullptr && *fake) {
    char* end = nullptr;
    const long long secs = std::strtoll(fake, &end, 10);
    if (*end != '\0' || secs <= 0) {
      return Status::InvalidArgument("$WANBACKUP_TEST_SNAPSHOT_TIME must be Unix seconds");
    }
    // Never in the future: a snapshot dated years ahead would stay the newest of its series,
    // and --keep-within would then forget every real one.
    if (secs > static_cast<long long>(std::time(nullptr))) {
      return Status::InvalidArgument(
          "$WANBACKUP_TEST_SNAPSHOT_TIME is in the future; it is for tests of retention only");
    }
    options.fake_start_unix_ms = static_cast<int64_t>(secs) * 1000;
  }
  return pipeline::TakeSnapshot(repo, source, options);
}

}  // namespace wanbackup::cli
