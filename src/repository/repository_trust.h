// The one guard every command passes when it opens a repository: the repository is checked
// against what this client remembers of it (the trust anchor, trust_anchor.h) and its catalog
// against the repository's sealed head (head.h). A repository that is suddenly unencrypted, has
// another id at a known location, another key, or a head counter below the highest this client
// saw is refused (Corruption, exit 3) with one line that says what changed and how to accept it
// deliberately (`wanbackup trust`). docs/threat-model.md says what this guarantees.
//
// The rules (CheckAgainstAnchor, RecordObservation) are pure functions; the rest runs on the
// thread that owns the repository's catalog.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "repository/keys.h"
#include "repository/repository.h"
#include "repository/trust_anchor.h"

namespace wanbackup::pipeline {

// What a repository shows now.
struct TrustObservation {
  std::string repository_id;
  std::string location;                  // canonical path
  std::string encryption;                // EncryptionModeName
  std::string key_fingerprint;           // empty: not known yet (before unlocking)
  std::optional<uint64_t> head_counter;  // the catalog's checked head (0: none); nullopt: unread
  uint64_t highest_snapshot = 0;         // the catalog's highest snapshot number (0: unread)
};

// Ok when `now` agrees with `known` (or nothing is known), else Corruption naming what changed
// and 'wanbackup trust'. `other_id_here`: another repository id this client knew at
// now.location.
Status CheckAgainstAnchor(const std::optional<AnchorRecord>& known,
                          const std::optional<std::string>& other_id_here,
                          const TrustObservation& now);
// Adds what `now` shows to `known` (creating it): a new location, a fingerprint learnt, a higher
// counter. REQUIRES: CheckAgainstAnchor passed. Returns whether anything changed.
bool RecordObservation(std::optional<AnchorRecord>& known, const TrustObservation& now);

// A fingerprint of the repository's config key: a MAC under it of a fixed label, in hex.
std::string RepositoryKeyFingerprint(const KeySet& keys);
// The repository directory as an absolute path without symlinks (as given when that fails).
std::string CanonicalLocation(const std::string& path);

// Before unlocking: id, location and encryption mode of config.json against the anchor.
Status CheckRepositoryIdentity(const TrustAnchorStore& anchors, const RepositoryConfig& config,
                               const std::string& location);
// After opening: the key fingerprint, the catalog against its head (when `check_head`; not
// for repair, whose catalog may be damaged) and the head counter against the anchor; then
// records what it saw, and has `repo` raise the anchor's counter as it commits new heads.
Status CheckOpenedRepository(const TrustAnchorStore& anchors, Repository& repo,
                             const std::string& location, bool check_head);
// `init`: this client made the repository `config` at `location`; it is the one expected there
// (the location is dropped from any other id's anchor).
Status RecordNewRepository(const TrustAnchorStore& anchors, const RepositoryConfig& config,
                           const std::string& location);
// `wanbackup trust`: the anchor says what the repository shows now (its id, encryption, key,
// head counter, this location; the location is dropped from any other id's anchor). Returns
// one line per thing that changed (empty: nothing did).
Result<std::vector<std::string>> AcceptRepository(const TrustAnchorStore& anchors, Repository& repo,
                                                  const std::string& location);

}  // namespace wanbackup::pipeline
