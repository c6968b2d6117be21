// The trust anchor: what this client knows about each repository it used, kept outside the
// repository (as borg keeps a security directory), so that storage an attacker can write cannot
// also rewrite what the client expects of it (docs/threat-model.md, "The trust anchor").
//
// One directory per repository id under the security directory, holding the file `anchor`:
// the encryption mode, a fingerprint of the config key (a digest under it, never the key), the
// highest head counter seen (head.h) and every location the repository was opened at. The
// security directory is $WANBACKUP_SECURITY_DIR, else /var/lib/wanbackup/security for root,
// else $XDG_STATE_HOME/wanbackup/security or ~/.local/state/wanbackup/security. Directories
// 0700, files 0600, written through a temporary created with O_EXCL|O_NOFOLLOW, fsynced and
// renamed. Updates of one repository's anchor are serialized by flock() on its directory.
//
// Thread-safe (no state beyond the directory's path); processes are serialized by the flock.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace wanbackup::pipeline {

struct AnchorRecord {
  std::string repository_id;
  std::string encryption;       // "passphrase", "keyfile" or "none" (EncryptionModeName)
  std::string key_fingerprint;  // hex; see RepositoryKeyFingerprint (repository_trust.h)
  uint64_t head_counter = 0;    // the highest head counter seen (0: never a head)
  // The highest snapshot number seen in a catalog checked against its head (0: none). Never
  // lowered, not even by `trust`: a catalog that fell behind its packs must not give out again
  // the number of a snapshot it lost, or two snapshots share it (round 6, W1, W2).
  uint64_t highest_snapshot = 0;
  std::vector<std::string> locations;  // where it was opened (canonical paths)
};

// The text form (a few "key value" lines, docs/threat-model.md). EncodeAnchor expects values
// that CheckAnchorValues accepts (the store checks before it writes). The parser is strict
// (Corruption): a malformed or unknown line, a control character, a single-value key twice.
std::string EncodeAnchor(const AnchorRecord& record);
Result<AnchorRecord> DecodeAnchor(const std::string& text);
// InvalidArgument when a value holds a control character (a newline would start a line of its
// own): a repository at such a path cannot be recorded.
Status CheckAnchorValues(const AnchorRecord& record);

// Where anchors live by default (see above); the variable first.
std::string DefaultSecurityDir();

class TrustAnchorStore {
 public:
  explicit TrustAnchorStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // The anchor of `repository_id` (nullopt: none yet).
  Result<std::optional<AnchorRecord>> Load(const std::string& repository_id) const;
  // Every anchor in the directory (none: an empty list), by repository id.
  Result<std::vector<AnchorRecord>> All() const;
  // The id of the repository this client knew at `location` other than `except` (nullopt: none).
  Result<std::optional<std::string>> IdAt(const std::string& location,
                                          const std::string& except) const;
  // Under the anchor's lock: loads it (nullopt when none), lets `update` change it, and writes
  // it when `update` returns true.
  Status Update(const std::string& repository_id,
                const std::function<bool(std::optional<AnchorRecord>&)>& update) const;

 private:
  Status Write(const AnchorRecord& record) const;

  std::string dir_;
};

}  // namespace wanbackup::pipeline
