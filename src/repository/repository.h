// Repository: a directory holding config.json (format, chunk size, compression, wrapped key),
// catalog.db (SQLite), packs/xx/<id>.pack and a lock file (docs/format.md).
//
// Opening takes the lock its mode needs (repo_lock.h): readers a shared lock, appending writers
// the writer lock, writers that remove things (forget, prune, repair, migrate) both exclusively.
// A holder blocks others up to LockOptions::wait, then Busy names it. Threading: config(), keys()
// and Pack() are thread-safe; catalog() belongs to the thread that opened the repository.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "catalog/catalog.h"
#include "common/result.h"
#include "common/secret.h"
#include "repository/keys.h"
#include "repository/repo_lock.h"
#include "store/pack.h"
#include "store/pack_store.h"

namespace wanbackup::pipeline {

class S3Objects;
class S3RepoLock;

enum class EncryptionMode { kPassphrase, kKeyFile, kNone };

// Format 2: sealed snapshot records in the packs and an authenticated config.json. Format 3:
// forget records (RecordKind::kForget) may be in the packs; new repositories get it, and `forget`
// upgrades a format-2 repository before it writes its first one (a wanbackup that knows only
// format 2 would resurrect forgotten snapshots in a catalog rebuild). Format 1 repositories open
// only for `wanbackup migrate`.
inline constexpr int kRepositoryFormat = 3;
inline constexpr int kMinOpenFormat = 2;

struct RepositoryConfig {
  int format = kRepositoryFormat;
  std::string id;  // 32 hex digits
  std::string created;
  uint32_t chunk_size = 4 << 20;
  int zstd_level = 3;
  EncryptionMode mode = EncryptionMode::kPassphrase;
  KdfParams kdf;
  std::string wrapped_key;     // hex; empty without encryption
  std::string authentication;  // hex KeySet::ConfigMac of the rest (format 2)
};

// How to unlock a repository: its passphrase or its key file.
struct Credentials {
  Secret passphrase;
  std::string key_file;
};

struct InitOptions {
  uint32_t chunk_size = 4 << 20;  // a power of two from 64 KiB to 64 MiB
  int zstd_level = 3;             // 0 stores data uncompressed
  EncryptionMode mode = EncryptionMode::kPassphrase;
  Credentials credentials;  // passphrase, or key file to use/create
  KdfParams kdf = {};       // salt filled in by Init
};

// kRead: a shared lock (readers). kWrite: the writer lock (appending: snapshot, key change).
// kExclusive: the writer lock and no readers (forget, prune). kMigrate: as kExclusive, and an
// older format is accepted. kRepair: as kExclusive, keys unlocked, no catalog opened (it may be
// damaged).
// The catalog inside a repository directory (for readers of the job history only; everything
// else goes through Repository).
inline constexpr const char kCatalogFile[] = "catalog.db";

enum class OpenMode { kRead, kWrite, kExclusive, kMigrate, kRepair };

class Repository {
 public:
  // Creates a repository at `path` (a new or empty directory). Fails with AlreadyExists when a
  // repository (or anything else) is there. With a key file that does not exist yet, writes a
  // new one (mode 0600).
  static Status Init(const std::string& path, const InitOptions& options);
  // Reads a repository's config.json without unlocking it (to learn what it needs).
  static Result<RepositoryConfig> ReadConfig(const std::string& path);
  // Opens it; kWrite takes the writer lock. Wrong credentials: AuthFailed. Not a repository:
  // NotFound. A config.json or catalog that was altered, or that disagree: Corruption, before
  // anything is written. A damaged or missing catalog: Corruption naming 'repair catalog'.
  // Where nothing can be written (a read-only mount, write-protected media, a directory without
  // write permission), kRead opens the catalog read-only and takes no lock file, and every other
  // mode is PermissionDenied: "repository PATH is read-only; COMMAND needs to write to it".
  //
  // `path` may be an S3 URL (s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX], store/s3_url.h): then
  // config.json and the packs are objects, and the catalog is a cache in `cache_dir` (empty:
  // DefaultCacheDir of the repository's id), rebuilt from the packs when it lacks what the store
  // holds, incrementally when it only lacks new packs (cache_refresh.h; docs/format.md, "A
  // repository on S3"). The lock files are the cache directory's.
  static Result<std::unique_ptr<Repository>> Open(const std::string& path,
                                                  const Credentials& credentials, OpenMode mode,
                                                  const LockOptions& lock = {},
                                                  const std::string& cache_dir = "");
  ~Repository();

  // The directory, or the S3 URL in its canonical form.
  const std::string& path() const { return path_; }
  // True for a repository on S3 (its catalog is a cache).
  bool remote() const { return s3_ != nullptr; }
  // Where the catalog and the lock files are: the repository directory, or the cache directory.
  const std::string& local_dir() const { return s3_ ? cache_dir_ : path_; }
  const RepositoryConfig& config() const { return config_; }
  const KeySet& keys() const { return *keys_; }
  catalog::Catalog& catalog() { return *catalog_; }
  bool has_catalog() const { return catalog_ != nullptr; }  // not while a repair replaces it
  // Opened to write, where something can be written.
  bool writable() const { return !reader_ && !read_only_; }

  // Where the packs are (pack_store.h).
  PackStore& packs() { return *store_; }
  std::string PackPath(const std::string& name) const;
  std::string CatalogPath() const;
  // Replaces catalog.db by the catalog built at `built_path` (repair catalog): the old one and
  // its WAL are kept beside it as catalog.db.damaged-TIME. REQUIRES: opened with kRepair.
  Status InstallCatalog(const std::string& built_path, std::string* kept_as);
  // Records the settings config.json must agree with (repository id, encryption, KDF floor) in
  // the catalog, in its own transaction.
  Status WriteSettings(catalog::Catalog* into = nullptr);
  // Rewrites config.json as format 2, authenticated. REQUIRES: opened with kMigrate.
  Status UpgradeConfig();
  // Opened with kMigrate and a config.json of format 1: what the catalog shows of a newer format
  // (catalog_probe.h); empty when nothing does. The catalog is not open yet then (catalog() must
  // not be used): OpenLegacyCatalog opens it, upgrading its schema, once migrate has checked.
  const std::string& newer_format_evidence() const { return newer_format_evidence_; }
  Status OpenLegacyCatalog();
  // A new pack with a random name, registered in the catalog (in the caller's transaction).
  Result<std::unique_ptr<PackWriter>> NewPack(int64_t* pack_id);
  // A new pack with a random name (in *name), in no catalog yet (repair catalog's new head).
  Result<std::unique_ptr<PackWriter>> NewPackFile(std::string* name);
  // A reader of the pack, its header checked (cached; thread-safe). Packs the catalog gained
  // after opening need LoadPacks() first.
  Result<const PackReader*> Pack(int64_t pack_id);
  // Removes a whole pack from the store (prune). REQUIRES: the catalog no longer names it, and
  // that is committed.
  Status RemovePack(int64_t pack_id, const std::string& name);
  // (Re)reads the pack table from the catalog. Call on the catalog's thread.
  Status LoadPacks();

  // Re-wraps the master key for new credentials (a new passphrase, or a key file); data untouched.
  // With `kdf` (passphrase only; its salt is ignored), the new wrapping uses that Argon2id cost,
  // which may only be raised (CheckKdfRaise); without, the current cost is kept.
  // REQUIRES: opened with kWrite.
  Status ChangeKey(EncryptionMode mode, const Credentials& credentials,
                   const std::optional<KdfParams>& kdf = std::nullopt);
  // Heads (head.h): a command that committed a new head calls HeadCommitted with its counter,
  // after the commit; the trust anchor (trust_anchor.h) listens, to remember the highest counter.
  void set_head_listener(std::function<void(uint64_t)> listener) {
    head_listener_ = std::move(listener);
  }
  void HeadCommitted(uint64_t counter) const {
    if (head_listener_) head_listener_(counter);
  }

  // The Argon2id cost a passphrase gets when none is asked for: the current one, or, under a key
  // file, the highest an earlier passphrase had (at least the defaults).
  Result<KdfParams> PassphraseCost();

  // The catalog a cache rebuild made at `built_path` replaces the cache's catalog (no copy is
  // kept: the packs are the truth). REQUIRES: remote(), the cache's refresh lock held exclusively.
  Status InstallCacheCatalog(const std::string& built_path);

 private:
  static Status InitS3(const std::string& url, const InitOptions& options);
  static Result<std::unique_ptr<Repository>> OpenS3(const std::string& url,
                                                    const Credentials& credentials, OpenMode mode,
                                                    const LockOptions& lock,
                                                    const std::string& cache_dir);
  // Opens (or makes) the cache's catalog, refreshed from the packs when it can be
  // (cache_refresh.h).
  Status OpenCache(OpenMode mode, const LockOptions& lock);
  // Writes config.json (atomically in a directory; one PUT on S3).
  Status WriteConfigFile(const RepositoryConfig& config);
  Repository() = default;
  bool writer() const { return lock_ && lock_->kind() != LockKind::kShared; }
  Status Unlock(const Credentials& credentials);
  Status OpenCatalog();
  Status CheckSettings();
  Status CheckPacksUnencrypted();
  std::string NewerFormatEvidence() const;
  Status RefuseFormat1() const;

  std::string path_;
  bool read_only_ = false;  // nothing can be written there: opened for reading only
  bool reader_ = false;     // opened with OpenMode::kRead
  RepositoryConfig config_;
  std::unique_ptr<KeySet> keys_;
  SecureKey master_;  // locked memory, wiped when freed; needed to re-wrap it for new credentials
  std::unique_ptr<catalog::Catalog> catalog_;
  std::unique_ptr<RepoLock> lock_;
  std::string newer_format_evidence_;  // format-1 config.json only
  std::mutex packs_mu_;
  std::unique_ptr<PackStore> store_;
  std::unordered_map<int64_t, std::unique_ptr<PackReader>> pack_readers_;  // GUARDED_BY(packs_mu_)
  std::unordered_set<int64_t> packs_opening_;         // GUARDED_BY(packs_mu_): being opened
  std::unordered_map<int64_t, Status> packs_failed_;  // GUARDED_BY(packs_mu_): its last open failed
  std::condition_variable packs_opened_;              // an opening ended
  std::unordered_map<int64_t, std::string> pack_names_;  // GUARDED_BY(packs_mu_)
  std::function<void(uint64_t)> head_listener_;
  std::shared_ptr<S3Objects> s3_;        // S3 repositories only
  std::unique_ptr<S3RepoLock> s3_lock_;  // S3 repositories only: the lock object
  std::string cache_dir_;                // S3 repositories only
  int cache_lock_fd_ = -1;               // CACHE/refresh.lock, flock()ed shared while open
};

// The cache directory of the S3 repository `repository_id`: /var/cache/wanbackup/ID for root,
// else $XDG_CACHE_HOME/wanbackup/ID or ~/.cache/wanbackup/ID.
std::string DefaultCacheDir(const std::string& repository_id);
// Makes the cache directory `dir` (and what is missing above it, mode 0700) and checks that
// nobody else can change it (repository_place.h); PermissionDenied naming `what` otherwise.
// Everything kept there (the catalog cache, a job history) is written by readers too.
Status PrepareCacheDir(const std::string& dir, const std::string& what);

// "passphrase", "keyfile", "none".
const char* EncryptionModeName(EncryptionMode mode);

// Parses config.json's text (untrusted: fuzzed); `path` names it in messages. Checks shape and
// ranges, not the authentication code (that needs the key: Repository::Open).
Result<RepositoryConfig> ParseRepositoryConfig(const std::string& text, const std::string& path);

}  // namespace wanbackup::pipeline
