#include "repository/repository_trust.h"

#include <algorithm>
#include <cstdlib>

#include <climits>

#include "repository/head.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline {
namespace {

constexpr char kFingerprintLabel[] = "wanbackup trust anchor key fingerprint v1";

std::string HowToAccept(const std::string& location) {
  return "if that is intended, accept it with 'wanbackup trust --repo " + location + "'";
}

std::string Short(const std::string& fingerprint) {
  return fingerprint.substr(0, 16);
}

}  // namespace

Status CheckAgainstAnchor(const std::optional<AnchorRecord>& known,
                          const std::optional<std::string>& other_id_here,
                          const TrustObservation& now) {
  const std::string where = "the repository at " + now.location;
  if (other_id_here) {
    return Status::Corruption(where + " has id " + now.repository_id +
                              ", but this client knew repository " + *other_id_here +
                              " there: it was replaced; " + HowToAccept(now.location));
  }
  if (!known) return Status::Ok();
  if (known->encryption != "none" && now.encryption == "none") {
    return Status::Corruption(where + " is now NOT encrypted (its config.json says so; this " +
                              "client knew it as encrypted, " + known->encryption +
                              "): refusing to use it; " + HowToAccept(now.location));
  }
  if (!known->key_fingerprint.empty() && !now.key_fingerprint.empty() &&
      known->key_fingerprint != now.key_fingerprint) {
    return Status::Corruption(where + " (id " + now.repository_id +
                              ") has another key than this client knew (fingerprint " +
                              Short(now.key_fingerprint) + "…, was " +
                              Short(known->key_fingerprint) + "…); " + HowToAccept(now.location));
  }
  if (now.head_counter && *now.head_counter < known->head_counter) {
    const std::string shows =
        *now.head_counter == 0 ? "has no head" : "shows head " + std::to_string(*now.head_counter);
    return Status::Corruption(
        where + " " + shows + ", but this client saw head " + std::to_string(known->head_counter) +
        ": its catalog was rolled back or its newest packs are missing; run 'wanbackup repair "
        "catalog' (which rebuilds the catalog from the packs), or, to accept the older state, "
        "'wanbackup trust --repo " +
        now.location + "'");
  }
  return Status::Ok();
}

bool RecordObservation(std::optional<AnchorRecord>& known, const TrustObservation& now) {
  bool changed = false;
  if (!known) {
    known.emplace();
    known->repository_id = now.repository_id;
    changed = true;
  }
  if (known->encryption != now.encryption) {
    known->encryption = now.encryption;
    changed = true;
  }
  if (!now.key_fingerprint.empty() && known->key_fingerprint != now.key_fingerprint) {
    known->key_fingerprint = now.key_fingerprint;
    changed = true;
  }
  if (now.head_counter && *now.head_counter > known->head_counter) {
    known->head_counter = *now.head_counter;
    changed = true;
  }
  if (now.highest_snapshot > known->highest_snapshot) {
    known->highest_snapshot = now.highest_snapshot;
    changed = true;
  }
  bool listed = false;
  for (const std::string& l : known->locations)
    listed = listed || l == now.location;
  if (!listed) {
    known->locations.push_back(now.location);
    changed = true;
  }
  return changed;
}

std::string RepositoryKeyFingerprint(const KeySet& keys) {
  const Digest mac = keys.ConfigMac(kFingerprintLabel);
  return ToHex(mac.data(), mac.size());
}

std::string CanonicalLocation(const std::string& path) {
  if (IsS3Url(path)) {
    Result<S3Location> s3 = ParseS3Url(path);
    return s3.ok() ? s3->ToString() : path;
  }
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

Status CheckRepositoryIdentity(const TrustAnchorStore& anchors, const RepositoryConfig& config,
                               const std::string& location) {
  TrustObservation now;
  now.repository_id = config.id;
  now.location = location;
  now.encryption = EncryptionModeName(config.mode);
  WB_ASSIGN_OR_RETURN(const std::optional<AnchorRecord> known, anchors.Load(config.id));
  WB_ASSIGN_OR_RETURN(const std::optional<std::string> other, anchors.IdAt(location, config.id));
  return CheckAgainstAnchor(known, other, now);
}

Status CheckOpenedRepository(const TrustAnchorStore& anchors, Repository& repo,
                             const std::string& location, bool check_head) {
  TrustObservation now;
  now.repository_id = repo.config().id;
  now.location = location;
  now.encryption = EncryptionModeName(repo.config().mode);
  now.key_fingerprint = RepositoryKeyFingerprint(repo.keys());
  // The anchor first, the catalog after: a head a concurrent writer committed, and raised the
  // anchor for, is then in what the catalog shows.
  WB_ASSIGN_OR_RETURN(const std::optional<AnchorRecord> known, anchors.Load(now.repository_id));
  if (check_head && repo.config().format < kMinOpenFormat) {
    // Opened for migrate, before its catalog: a repository of that format has no head, and a
    // client that saw one here refuses it (a config.json turned back to format 1).
    now.head_counter = 0;
  } else if (check_head) {
    WB_ASSIGN_OR_RETURN(const uint64_t counter, CheckCatalogAgainstHead(repo));
    now.head_counter = counter;
    WB_ASSIGN_OR_RETURN(const int64_t highest, CatalogHighestListedId(repo.catalog()));
    now.highest_snapshot = static_cast<uint64_t>(highest);
  }
  WB_RETURN_IF_ERROR(CheckAgainstAnchor(known, std::nullopt, now));
  // A catalog behind what this client saw (rebuilt without some packs, or an older state
  // accepted with `trust`): the numbers of the snapshots it lost are not given out again, so a
  // returning pack's snapshot never shares its number with a new one (round 6, W1, W2).
  // Bounded: a number no repository reaches is a damaged anchor, never a floor (round 7, X3).
  if (check_head && known && known->highest_snapshot > now.highest_snapshot &&
      known->highest_snapshot < static_cast<uint64_t>(catalog::kMaxSnapshotId) && repo.writable()) {
    WB_RETURN_IF_ERROR(
        RaiseCatalogSnapshotIdFloor(repo.catalog(), static_cast<int64_t>(known->highest_snapshot)));
  }
  WB_RETURN_IF_ERROR(anchors.Update(now.repository_id, [&](std::optional<AnchorRecord>& r) {
    return RecordObservation(r, now);
  }));
  repo.set_head_listener([anchors, id = now.repository_id, at = &repo](uint64_t counter) {
    // Best effort: the next open records both too. The listener lives in the repository it
    // points to.
    uint64_t highest = 0;
    if (at->has_catalog()) {
      const Result<int64_t> h = CatalogHighestListedId(at->catalog());
      if (h.ok()) highest = static_cast<uint64_t>(*h);
    }
    (void)anchors.Update(id, [counter, highest](std::optional<AnchorRecord>& r) {
      if (!r || (r->head_counter >= counter && r->highest_snapshot >= highest)) return false;
      r->head_counter = std::max(r->head_counter, counter);
      r->highest_snapshot = std::max(r->highest_snapshot, highest);
      return true;
    });
  });
  return Status::Ok();
}

namespace {

// Drops `location` from the anchor of every id but `id`; one line per id.
Status DisownLocation(const TrustAnchorStore& anchors, const std::string& id,
                      const std::string& location, std::vector<std::string>* changes) {
  WB_ASSIGN_OR_RETURN(std::optional<std::string> old, anchors.IdAt(location, id));
  while (old) {
    changes->push_back("repository " + *old + " is no longer expected at " + location);
    WB_RETURN_IF_ERROR(anchors.Update(*old, [&](std::optional<AnchorRecord>& r) {
      if (!r) return false;
      std::erase(r->locations, location);
      return true;
    }));
    WB_ASSIGN_OR_RETURN(old, anchors.IdAt(location, id));
  }
  return Status::Ok();
}

}  // namespace

Status RecordNewRepository(const TrustAnchorStore& anchors, const RepositoryConfig& config,
                           const std::string& location) {
  std::vector<std::string> changes;
  WB_RETURN_IF_ERROR(DisownLocation(anchors, config.id, location, &changes));
  TrustObservation now;
  now.repository_id = config.id;
  now.location = location;
  now.encryption = EncryptionModeName(config.mode);
  return anchors.Update(config.id,
                        [&](std::optional<AnchorRecord>& r) { return RecordObservation(r, now); });
}

Result<std::vector<std::string>> AcceptRepository(const TrustAnchorStore& anchors, Repository& repo,
                                                  const std::string& location) {
  std::vector<std::string> changes;
  const std::string id = repo.config().id;
  WB_RETURN_IF_ERROR(DisownLocation(anchors, id, location, &changes));
  // The counter of the head read from the packs and authenticated, with the catalog checked
  // against it; never the catalog's own setting, which storage an attacker can write.
  WB_ASSIGN_OR_RETURN(const uint64_t counter, CheckCatalogAgainstHead(repo));
  AnchorRecord now;
  now.repository_id = id;
  now.encryption = EncryptionModeName(repo.config().mode);
  now.key_fingerprint = RepositoryKeyFingerprint(repo.keys());
  now.head_counter = counter;
  WB_ASSIGN_OR_RETURN(const int64_t highest, CatalogHighestListedId(repo.catalog()));
  now.highest_snapshot = static_cast<uint64_t>(highest);
  WB_RETURN_IF_ERROR(anchors.Update(id, [&](std::optional<AnchorRecord>& r) {
    if (!r) {
      changes.push_back("repository " + id + " at " + location + " is trusted from now on");
      now.locations = {location};
      r = now;
      return true;
    }
    if (r->encryption != now.encryption) {
      changes.push_back("encryption: " + r->encryption + " -> " + now.encryption);
    }
    if (!r->key_fingerprint.empty() && r->key_fingerprint != now.key_fingerprint) {
      changes.push_back("key fingerprint: " + Short(r->key_fingerprint) + "… -> " +
                        Short(now.key_fingerprint) + "…");
    }
    if (r->head_counter != now.head_counter) {
      changes.push_back("head counter: " + std::to_string(r->head_counter) + " -> " +
                        std::to_string(now.head_counter));
    }
    // Never lowered: what an older state lost keeps its numbers (see AnchorRecord).
    now.highest_snapshot = std::max(now.highest_snapshot, r->highest_snapshot);
    now.locations = r->locations;
    if (std::find(now.locations.begin(), now.locations.end(), location) == now.locations.end()) {
      changes.push_back("location added: " + location);
      now.locations.push_back(location);
    }
    r = now;
    return true;
  }));
  return changes;
}

}  // namespace wanbackup::pipeline
