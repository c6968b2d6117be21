// May this command write there? The CLI's half of the write guard (guard/write_guard.h): it
// fills in what the command knows — the repository it opened (its files, the sources of its
// snapshots, its replicas), the config of a job (every repository, every job's source), a
// copy's source — and asks the guard. Every command that writes calls RefuseWriteTarget before
// it opens the destination (no byte written, no login), in a dry run too. Called on the
// command's thread.
#pragma once

#include <string>
#include <vector>

#include "cli/repo_flags.h"
#include "cli/target_flags.h"
#include "common/status.h"
#include "jobs/config.h"
#include "repository/repository.h"

namespace wanbackup::cli {

struct WriteTarget {
  std::string to;  // an iSCSI URL or a path, as the user gave it; "-": standard output
  pipeline::Repository* repo = nullptr;  // the command's repository, if any
  bool holds_writer_lock = false;        // `repo` was opened for writing (replicate)
  const jobs::Config* config = nullptr;  // a job's config: its repositories and job sources
  std::string replicate_source;          // replicate: the source of the snapshot it writes
  bool overwrite_source = false;         // restore --overwrite-source: of this source only
  std::string restored_source;           // restore: the source of the snapshot it writes
  std::string copy_source;               // copy: what it reads
  // The key, passphrase and CHAP secret files the command uses (empty entries are skipped);
  // those of the environment ($WANBACKUP_KEY_FILE, ...) are added by RefuseWriteTarget.
  std::vector<std::string> credential_files;
};

// `flags`' key and password files, after the environment (WithEnvironment), and `target`'s
// CHAP secret files: what WriteTarget::credential_files lists for a command that has them.
std::vector<std::string> CredentialFiles(const RepoFlags& flags, const TargetFlags& target);

// InvalidArgument (exit 2), one line naming what the destination is, when the guard refuses it.
Status RefuseWriteTarget(const WriteTarget& target);

}  // namespace wanbackup::cli
