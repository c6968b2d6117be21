#include "catalog/internal/schema.h"

#include <iterator>

#include "catalog/catalog.h"

namespace wanbackup::catalog::internal {
namespace {

// Each entry upgrades the schema from version (index) to (index + 1). Append only.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE packs (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE,
  created INTEGER NOT NULL,
  size    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE chunks (
  id          INTEGER PRIMARY KEY,
  digest      BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
  pack_id     INTEGER NOT NULL REFERENCES packs(id),
  offset      INTEGER NOT NULL,
  stored_size INTEGER NOT NULL,
  raw_size    INTEGER NOT NULL
);
CREATE TABLE snapshots (
  id           INTEGER PRIMARY KEY,
  source       TEXT NOT NULL,
  tag          TEXT NOT NULL DEFAULT '',
  hostname     TEXT NOT NULL DEFAULT '',
  size_bytes   INTEGER NOT NULL,
  block_size   INTEGER NOT NULL,
  chunk_size   INTEGER NOT NULL,
  started      INTEGER NOT NULL,
  finished     INTEGER NOT NULL DEFAULT 0,
  status       TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed')),
  bytes_read   INTEGER NOT NULL DEFAULT 0,
  bytes_new    INTEGER NOT NULL DEFAULT 0,
  bytes_stored INTEGER NOT NULL DEFAULT 0,
  chunks_total INTEGER NOT NULL DEFAULT 0,
  chunks_new   INTEGER NOT NULL DEFAULT 0,
  chunks_zero  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE snapshot_maps (
  snapshot_id INTEGER NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
  first_index INTEGER NOT NULL,
  count       INTEGER NOT NULL,
  encoded     BLOB NOT NULL,
  PRIMARY KEY (snapshot_id, first_index)
) WITHOUT ROWID;
)sql",
    // 1 -> 2: sealed snapshot records in the packs (format 2): what each chunks row holds, the
    // record of each snapshot, and settings that must agree with config.json.
    R"sql(
ALTER TABLE chunks ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN record_id INTEGER REFERENCES chunks(id);
CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql",
    // 2 -> 3: the job history of `wanbackup run` (catalog/internal/job_runs.h).
    R"sql(
CREATE TABLE job_runs (
  id          INTEGER PRIMARY KEY,
  job         TEXT NOT NULL,
  started     INTEGER NOT NULL,
  finished    INTEGER NOT NULL DEFAULT 0,
  status      TEXT NOT NULL,
  pid         INTEGER NOT NULL,
  host        TEXT NOT NULL,
  snapshot_id INTEGER NOT NULL DEFAULT 0,
  bytes       INTEGER NOT NULL DEFAULT 0,
  steps       TEXT NOT NULL DEFAULT '[]',
  error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_runs_by_job ON job_runs (job, id);
)sql",
    // 3 -> 4: the replicas `wanbackup replicate` keeps (catalog/internal/replicas.h).
    R"sql(
CREATE TABLE replicas (
  id                  INTEGER PRIMARY KEY,
  identity            TEXT NOT NULL UNIQUE,
  target              TEXT NOT NULL,
  snapshot_id         INTEGER NOT NULL DEFAULT 0,
  writing_snapshot_id INTEGER NOT NULL DEFAULT 0,
  fingerprint         TEXT NOT NULL DEFAULT '',
  updated             INTEGER NOT NULL,
  bytes_written       INTEGER NOT NULL DEFAULT 0,
  chunks_written      INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 4 -> 5: the job that took each snapshot (a job's forget step considers only its own), and
    // the start time of a run's process (with its pid it tells a live run from a reused pid).
    R"sql(
ALTER TABLE snapshots ADD COLUMN job TEXT NOT NULL DEFAULT '';
ALTER TABLE job_runs ADD COLUMN pid_started INTEGER NOT NULL DEFAULT 0;
)sql",
    // 5 -> 6: each replica's record sealed under the repository key (pipeline/replicator.h):
    // rows from before have none, and their next replicate compares (round 10, AA2).
    R"sql(
ALTER TABLE replicas ADD COLUMN seal TEXT NOT NULL DEFAULT '';
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

}  // namespace

const char* SchemaMigration(int version) {
  return kMigrations[version];
}

}  // namespace wanbackup::catalog::internal
