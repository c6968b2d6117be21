#include "pipeline/replicator.h"

#include "common/failpoint.h"
#include "common/hex.h"
#include "repository/record.h"
#include "repository/snapshot_check.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Snap(int64_t id) {
  return "snapshot " + std::to_string(id);
}

// The snapshot `id`, if it is still there, complete and shaped like `target` (same size and
// chunk size, so that chunk maps can be compared index by index); else why not.
Result<std::string> Comparable(Repository& repo, int64_t id, const catalog::SnapshotInfo& target) {
  Result<catalog::SnapshotInfo> s = repo.catalog().GetSnapshot(id);
  if (!s.ok() && s.status().code() == StatusCode::kNotFound) return Snap(id) + " was forgotten";
  WB_RETURN_IF_ERROR(s.status());
  if (s->status != catalog::SnapshotStatus::kComplete) return Snap(id) + " is not complete";
  if (s->size_bytes != target.size_bytes || s->chunk_size != target.chunk_size) {
    return Snap(id) + " has another size or chunk size than " + Snap(target.id);
  }
  return std::string();
}

Status Save(Repository& repo, catalog::Replica* replica) {
  replica->updated_unix_ms = NowUnixMs();
  replica->seal = ReplicaSeal(repo, *replica);
  WB_ASSIGN_OR_RETURN(auto tx, repo.catalog().Begin());
  WB_ASSIGN_OR_RETURN(replica->id, repo.catalog().PutReplica(*replica));
  return tx->Commit();
}

// The sink, with the crash tests' failpoint after every write (common/failpoint.h).
class FailpointSink final : public BlockSink {
 public:
  explicit FailpointSink(BlockSink& inner) : inner_(inner) {}
  const std::string& name() const override { return inner_.name(); }
  bool sequential_only() const override { return inner_.sequential_only(); }
  bool zeros_are_free() const override { return inner_.zeros_are_free(); }
  Status Write(uint64_t offset, const uint8_t* data, size_t length) override {
    Status s = inner_.Write(offset, data, length);
    WB_FAILPOINT("replicate.after-write");
    return s;
  }
  Status Finish(uint64_t total_size) override {
    WB_FAILPOINT("replicate.before-finish");
    Status s = inner_.Finish(total_size);
    WB_FAILPOINT("replicate.after-finish");
    return s;
  }

 private:
  BlockSink& inner_;
};

ReplicatePlan Check(std::string reason) {
  return ReplicatePlan{ReplicateMode::kCheck, 0, std::move(reason)};
}

}  // namespace

namespace {

// The digest of snapshot `id`'s sealed record, as the catalog indexes it (checked against the
// sealed head when the repository was opened); "" for none.
std::string RecordDigestOf(Repository& repo, int64_t id) {
  if (id == 0) return "";
  Result<catalog::SnapshotInfo> s = repo.catalog().GetSnapshot(id);
  if (!s.ok() || s->status != catalog::SnapshotStatus::kComplete || s->record_id == 0) return "";
  Result<catalog::ChunkRecord> record = repo.catalog().GetChunk(s->record_id);
  if (!record.ok()) return "";
  return ToHex(record->digest.data(), record->digest.size());
}

}  // namespace

std::string ReplicaSeal(Repository& repo, const catalog::Replica& replica) {
  // Each field with its length, so that no two records read alike.
  std::string text = "wanbackup replica record v1\n";
  for (const std::string& field :
       {replica.identity, replica.target, std::to_string(replica.snapshot_id),
        RecordDigestOf(repo, replica.snapshot_id), std::to_string(replica.writing_snapshot_id),
        RecordDigestOf(repo, replica.writing_snapshot_id), replica.fingerprint}) {
    text += std::to_string(field.size()) + ":" + field + "\n";
  }
  const Digest mac = repo.keys().ConfigMac(text);
  return ToHex(mac.data(), mac.size());
}

bool ReplicaSealed(Repository& repo, const catalog::Replica& replica) {
  const std::string want = ReplicaSeal(repo, replica);
  if (replica.seal.size() != want.size()) return false;
  unsigned char differ = 0;  // every byte compared, whatever the first difference
  for (size_t i = 0; i < want.size(); ++i)
    differ |= static_cast<unsigned char>(replica.seal[i] ^ want[i]);
  return differ == 0;
}

const char* ReplicateModeName(ReplicateMode mode) {
  switch (mode) {
    case ReplicateMode::kDiff:
      return "diff";
    case ReplicateMode::kCheck:
      return "check";
    case ReplicateMode::kFull:
      return "full";
  }
  return "?";
}

Result<ReplicatePlan> PlanReplicate(Repository& repo, const catalog::SnapshotInfo& snap,
                                    const catalog::Replica& replica,
                                    const ReplicateOptions& options) {
  if (options.target_new) return ReplicatePlan{ReplicateMode::kFull, 0, "a new file"};
  if (options.check) return Check("--check: reading the replica to compare");
  if (replica.id == 0) return Check("no record of this replica: reading it to compare");
  if (!ReplicaSealed(repo, replica)) {
    // A record of a snapshot since forgotten no longer verifies either: say so.
    if (replica.snapshot_id != 0 && RecordDigestOf(repo, replica.snapshot_id).empty()) {
      return Check("it held " + Snap(replica.snapshot_id) +
                   ", which was forgotten: reading it to compare");
    }
    return Check(
        "its record is not sealed by this repository's key (catalog.db was changed, or the "
        "record is from before records were sealed): reading it to compare");
  }
  if (options.fingerprint.empty()) {
    return Check("it has no stable identity (no device id): reading it to compare");
  }
  if (replica.fingerprint != options.fingerprint) {
    return Check("it changed since the last run (" +
                 (replica.fingerprint.empty() ? std::string("no record") : replica.fingerprint) +
                 " -> " + options.fingerprint + "): reading it to compare");
  }
  if (replica.snapshot_id == 0) {
    return Check("what it holds is unknown (a run that compared it was interrupted): reading it");
  }
  WB_ASSIGN_OR_RETURN(std::string why_not, Comparable(repo, replica.snapshot_id, snap));
  if (!why_not.empty()) return Check("it held " + why_not + ": reading it to compare");
  std::string reason = "holds " + Snap(replica.snapshot_id);
  if (replica.writing_snapshot_id != 0) {
    WB_ASSIGN_OR_RETURN(why_not, Comparable(repo, replica.writing_snapshot_id, snap));
    if (!why_not.empty()) {
      return Check("an interrupted run was writing " + why_not + ": reading it to compare");
    }
    reason += ", partly " + Snap(replica.writing_snapshot_id) + " (an interrupted run)";
  }
  return ReplicatePlan{ReplicateMode::kDiff, replica.snapshot_id, reason};
}

namespace {

// A snapshot's sealed map (the record checked against the row first), walked in index order.
struct SealedMapOf {
  SealedMapOf(Repository& repo, SnapshotRecord r)
      : codec(repo.keys(), 0), record(std::move(r)), map(repo, codec, record) {}
  RecordCodec codec;
  const SnapshotRecord record;
  SealedMap map;
};

// What a run compares against: the sealed maps a diff starts from, or the replica read back.
struct Baseline {
  std::unique_ptr<SealedMapOf> base;         // diff: the snapshot the replica held
  std::unique_ptr<SealedMapOf> interrupted;  // diff: the one an interrupted run was writing
  std::unique_ptr<BlockSource> readback;     // check
};

Result<std::unique_ptr<SealedMapOf>> LoadSealedMap(Repository& repo, int64_t id) {
  WB_ASSIGN_OR_RETURN(catalog::SnapshotInfo other, repo.catalog().GetSnapshot(id));
  WB_RETURN_IF_ERROR(CheckSnapshotAgainstRecord(repo, other, true));
  RecordCodec codec(repo.keys(), 0);
  WB_ASSIGN_OR_RETURN(SnapshotRecord record, LoadMatchingRecord(repo, codec, other));
  return std::make_unique<SealedMapOf>(repo, std::move(record));
}

Status LoadBaseline(Repository& repo, const catalog::SnapshotInfo& snap, const ReplicatePlan& plan,
                    int64_t was_writing, const ReplicateOptions& options, Baseline* out) {
  if (plan.mode == ReplicateMode::kDiff) {
    // The maps the diff trusts are the sealed ones, like the snapshot's own.
    if (plan.base_snapshot != snap.id) {
      WB_ASSIGN_OR_RETURN(out->base, LoadSealedMap(repo, plan.base_snapshot));
    }
    if (was_writing != 0 && was_writing != snap.id) {
      WB_ASSIGN_OR_RETURN(out->interrupted, LoadSealedMap(repo, was_writing));
    }
  } else if (plan.mode == ReplicateMode::kCheck) {
    if (!options.open_readback) return Status::Internal("replicate: no way to read the replica");
    WB_ASSIGN_OR_RETURN(out->readback, options.open_readback());
  }
  return Status::Ok();
}

// Whether chunk `i` of a sealed map differs from `digest` (no map: the snapshot itself).
Result<bool> Differs(SealedMapOf* from, uint64_t i, const Digest& digest) {
  if (from == nullptr) return false;
  WB_ASSIGN_OR_RETURN(Digest d, from->map.At(i));
  return d != digest;
}

// The chunks to write: where the maps differ (either of them, after an interrupted run), or
// where the replica read back differs (counting the bytes read); all of a new file.
ChunkSelector Selector(Repository& repo, const catalog::SnapshotInfo& snap, ReplicateMode mode,
                       const Baseline& b, uint64_t* bytes_read) {
  if (mode == ReplicateMode::kDiff) {
    return [&b](uint64_t first, const std::vector<Digest>& digests,
                std::vector<bool>* write) -> Status {
      write->assign(digests.size(), false);
      for (size_t k = 0; k < digests.size(); ++k) {
        WB_ASSIGN_OR_RETURN(const bool base, Differs(b.base.get(), first + k, digests[k]));
        WB_ASSIGN_OR_RETURN(const bool cut, Differs(b.interrupted.get(), first + k, digests[k]));
        (*write)[k] = base || cut;
      }
      return Status::Ok();
    };
  }
  if (mode == ReplicateMode::kCheck) {
    return [&repo, &snap, &b, bytes_read](uint64_t first, const std::vector<Digest>& digests,
                                          std::vector<bool>* write) {
      WB_RETURN_IF_ERROR(CompareSegment(repo, snap, *b.readback, first, digests, write));
      const uint64_t begin = first * snap.chunk_size;
      *bytes_read +=
          std::min<uint64_t>(snap.size_bytes, begin + digests.size() * snap.chunk_size) - begin;
      return Status::Ok();
    };
  }
  return nullptr;
}

}  // namespace

Result<ReplicateResult> Replicate(Repository& repo, const catalog::SnapshotInfo& snap,
                                  catalog::Replica* replica, BlockSink& sink,
                                  const ReplicateOptions& options) {
  const auto start = Clock::now();
  ReplicateResult result;
  WB_ASSIGN_OR_RETURN(result.plan, PlanReplicate(repo, snap, *replica, options));
  if (!options.restore.record_checked) {
    WB_RETURN_IF_ERROR(CheckSnapshotAgainstRecord(repo, snap, true));
  }
  Baseline baseline;
  WB_RETURN_IF_ERROR(
      LoadBaseline(repo, snap, result.plan, replica->writing_snapshot_id, options, &baseline));

  // Inconsistent from here until the sink is finished. The record keeps the snapshot the
  // replica held only while a diff from it stays exact: not when it is being compared, nor when
  // a second interrupted target would have to be remembered.
  catalog::Replica r = *replica;
  r.writing_snapshot_id = snap.id;
  r.snapshot_id = result.plan.mode == ReplicateMode::kDiff && !baseline.interrupted
                      ? result.plan.base_snapshot
                      : 0;
  r.fingerprint = options.fingerprint;
  WB_RETURN_IF_ERROR(Save(repo, &r));
  *replica = r;

  RestoreOptions restore = options.restore;
  restore.record_checked = true;
  FailpointSink sink_with_failpoints(sink);
  WB_ASSIGN_OR_RETURN(
      RestoreResult written,
      RestoreSelected(repo, snap, sink_with_failpoints, restore,
                      Selector(repo, snap, result.plan.mode, baseline, &result.bytes_read)));

  r.snapshot_id = snap.id;
  r.writing_snapshot_id = 0;
  r.fingerprint = options.final_fingerprint ? options.final_fingerprint() : options.fingerprint;
  r.bytes_written = written.bytes_written;
  r.chunks_written = written.chunks_written;
  WB_RETURN_IF_ERROR(Save(repo, &r));
  *replica = r;
  result.chunks_total = snap.chunk_count();
  result.chunks_written = written.chunks_written;
  result.bytes_written = written.bytes_written;
  result.elapsed = Clock::now() - start;
  return result;
}

}  // namespace wanbackup::pipeline
