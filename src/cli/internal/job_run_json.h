// The fields `run --json` and `jobs --json` both give a job run. What a run did not reach is
// null, not 0 or "": no snapshot taken, not finished, no error. Header-only.
#pragma once

#include <nlohmann/json.hpp>

#include "catalog/catalog.h"

namespace wanbackup::cli::internal {

inline nlohmann::json JobRunJson(const catalog::JobRun& r, nlohmann::json steps) {
  const nlohmann::json null;
  return {{"status", r.status},
          {"started_unix_ms", r.started_unix_ms},
          {"finished_unix_ms", r.finished_unix_ms != 0 ? nlohmann::json(r.finished_unix_ms) : null},
          {"snapshot", r.snapshot_id != 0 ? nlohmann::json(r.snapshot_id) : null},
          {"bytes", r.bytes},
          {"steps", std::move(steps)},
          {"error", r.error.empty() ? null : nlohmann::json(r.error)}};
}

}  // namespace wanbackup::cli::internal
