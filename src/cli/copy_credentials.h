// Which CHAP flags go to which end of `wanbackup copy SRC DST` when both ends may be iSCSI LUNs.
// A pure decision (no files read, no login): the secret files are read later, through
// BuildConnectionOptions and its trust checks. Not thread-safe; called once on the main thread.
#pragma once

#include <string>

#include "cli/target_flags.h"
#include "common/result.h"

namespace wanbackup::cli {

struct CopyCredentialFlags {
  TargetFlags shared;                        // --chap-user, --chap-secret-file, mutual flags, ...
  std::string source_chap_secret_file;       // --source-chap-secret-file
  std::string destination_chap_secret_file;  // --destination-chap-secret-file
};

struct CopyEndFlags {
  TargetFlags source;
  TargetFlags destination;
};

// The rules (docs/operations.md, "copy between two CHAP LUNs"):
// - --source-chap-secret-file / --destination-chap-secret-file give each end the secret of the
//   user its URL names (iscsi://user@host/...); an end without its own file logs in without a
//   secret file (an end with a user then falls back to $WANBACKUP_CHAP_SECRET). A per-end file
//   for an end whose URL names no user is refused, as is mixing them with --chap-secret-file.
// - Without per-end files, --chap-secret-file goes to the one end whose URL names a user (or to
//   both with --chap-user); both URLs naming users is refused with the flags to use instead.
// - The mutual CHAP flags (--target-chap-user, --target-chap-secret-file) go to the one end whose
//   URL names a user; with a user at both ends they are refused (no per-end mutual flags).
Result<CopyEndFlags> ResolveCopyCredentials(const std::string& source,
                                            const std::string& destination,
                                            const CopyCredentialFlags& flags);

}  // namespace wanbackup::cli
