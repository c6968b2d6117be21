#include "repository/repository.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <sodium.h>

#include "catalog/catalog_probe.h"
#include "common/atomic_file.h"
#include "common/failpoint.h"
#include "repository/internal/config_json.h"
#include "repository/record.h"
#include "repository/repository_place.h"
#include "repository/s3_lock.h"
#include "store/fs_util.h"
#include "store/s3_objects.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline {
namespace {

using internal::Authentic;
using internal::Authenticate;
using internal::ConfigJson;

constexpr const char kConfigName[] = "config.json";
constexpr const char kCatalogName[] = "catalog.db";

std::string Join(const std::string& a, const std::string& b) {
  return a + "/" + b;
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "creating " + path);
  }
  return Status::Ok();
}

// Writes `content` to dir/name atomically and durably (0600; common/atomic_file.h).
Status WriteFileAtomic(const std::string& dir, const std::string& name,
                       const std::string& content) {
  return WriteFileAtomically(Join(dir, name), content, 0600);
}

// Whether nothing can be written in `dir`: a read-only file system, or no write permission.
bool ReadOnlyDir(const std::string& dir) {
  return ::access(dir.c_str(), W_OK) != 0 && (errno == EROFS || errno == EACCES);
}

bool DirIsEmptyOrMissing(const std::string& path, bool* exists) {
  DIR* d = ::opendir(path.c_str());
  *exists = d != nullptr;
  if (d == nullptr) return errno == ENOENT;
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") empty = false;
  }
  ::closedir(d);
  return empty;
}

Result<Secret> ReadKeyFile(const std::string& path) {
  Result<Secret> s = ReadSecretFile(path);
  if (!s.ok()) return s.status().WithContext("key file");
  return s;
}

// Writes a new random key file (mode 0600 from the first byte) unless `path` exists.
Status CreateKeyFileIfMissing(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return Status::Ok();
  const Secret contents = NewKeyFileContents();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "creating key file " + path);
  const bool ok = ::write(fd, contents.reveal().data(), contents.reveal().size()) ==
                  static_cast<ssize_t>(contents.reveal().size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || !synced) return Status::IoError("writing key file " + path);
  // Its name too, before config.json names it: after a power loss a repository wrapped under a
  // key file that is not there could not be opened (round 9, Z7).
  const size_t slash = path.rfind('/');
  return SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

Result<SecureKey> KekFor(const RepositoryConfig& config, const Credentials& c) {
  if (config.mode == EncryptionMode::kKeyFile) {
    if (c.key_file.empty()) {
      return Status::InvalidArgument(
          "this repository is unlocked with a key file: give --key-file");
    }
    WB_ASSIGN_OR_RETURN(Secret contents, ReadKeyFile(c.key_file));
    return KeyFromKeyFile(contents);
  }
  if (c.passphrase.empty()) {
    return Status::InvalidArgument(
        "this repository needs its passphrase: --password-file FILE, $WANBACKUP_PASSWORD, or a "
        "terminal to type it");
  }
  return KeyFromPassphrase(c.passphrase, config.kdf);
}

// Settings kept in the catalog (Catalog::GetSetting) that config.json must agree with.
constexpr const char kSettingId[] = "repository_id";
constexpr const char kSettingEncrypted[] = "encrypted";
constexpr const char kSettingKdfOps[] = "kdf_min_opslimit";
constexpr const char kSettingKdfMem[] = "kdf_min_memlimit";

std::string MiB(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

uint64_t ParseSetting(const std::string& value) {
  return value.empty() ? 0 : std::strtoull(value.c_str(), nullptr, 10);
}

// What Init can refuse before it touches anything: the options, then the directory (a new or
// empty one; `exists` says whether it is there).
Status CheckInitOptions(const InitOptions& o) {
  const uint32_t cs = o.chunk_size;
  if (cs < (64u << 10) || cs > (64u << 20) || (cs & (cs - 1)) != 0) {
    return Status::InvalidArgument("--chunk-size must be a power of two from 64K to 64M");
  }
  if (o.zstd_level < 0 || o.zstd_level > 19) {
    return Status::InvalidArgument("compression level must be 0 (none) to 19");
  }
  return Status::Ok();
}

Status CheckInitTarget(const std::string& path, const InitOptions& o, bool* exists) {
  WB_RETURN_IF_ERROR(CheckInitOptions(o));
  if (!DirIsEmptyOrMissing(path, exists)) {
    struct stat st {};
    if (::stat(Join(path, kConfigName).c_str(), &st) == 0) {
      return Status::AlreadyExists(path + " already holds a repository");
    }
    return Status::AlreadyExists(path + " is not empty; give a new or empty directory");
  }
  return Status::Ok();
}

// The key that wraps the master key of a new repository: from the passphrase (with a new salt
// in c->kdf), or from the key file (written first when it does not exist).
Result<SecureKey> NewKek(const InitOptions& o, RepositoryConfig* c) {
  if (o.mode == EncryptionMode::kPassphrase) {
    WB_RETURN_IF_ERROR(CheckKdfParams(o.kdf));
    c->kdf = o.kdf;
    randombytes_buf(c->kdf.salt.data(), c->kdf.salt.size());
    return KeyFromPassphrase(o.credentials.passphrase, c->kdf);
  }
  if (o.credentials.key_file.empty()) return Status::InvalidArgument("--key-file is required");
  WB_RETURN_IF_ERROR(CreateKeyFileIfMissing(o.credentials.key_file));
  WB_ASSIGN_OR_RETURN(Secret contents, ReadKeyFile(o.credentials.key_file));
  return KeyFromKeyFile(contents);
}

// A new repository's config.json: a random id, a new master key wrapped for the credentials
// (unless unencrypted), and the authentication code.
Result<RepositoryConfig> NewConfig(const InitOptions& o) {
  RepositoryConfig c;
  uint8_t id[16];
  randombytes_buf(id, sizeof id);
  c.id = ToHex(id, sizeof id);
  c.created = NowIso8601();
  c.chunk_size = o.chunk_size;
  c.zstd_level = o.zstd_level;
  c.mode = o.mode;
  if (o.mode == EncryptionMode::kNone) {
    c.authentication = Authenticate(c, KeySet::Unencrypted(c.id));
    return c;
  }
  WB_ASSIGN_OR_RETURN(const SecureKey kek, NewKek(o, &c));
  const SecureKey master = RandomKey();
  c.wrapped_key = WrapKey(master, kek, c.id);
  c.authentication = Authenticate(c, KeySet(master));
  return c;
}

// The directory, packs/, and the lock files (repo_lock.h), so that no command ever adds a file
// to a repository it reads.
Status MakeLayout(const std::string& path, bool exists) {
  if (!exists) WB_RETURN_IF_ERROR(MakeDir(path));
  // An empty directory made beforehand (a mount point) becomes 0700 as a new one is: the names
  // of packs and the catalog's size are nobody else's business (docs/format.md).
  if (exists && ::chmod(path.c_str(), 0700) != 0) {
    return Status::FromErrno(errno, "chmod 0700 " + path);
  }
  WB_RETURN_IF_ERROR(MakeDir(Join(path, "packs")));
  WB_RETURN_IF_ERROR(MakeDir(Join(path, "readers")));
  for (const char* name : {"lock", "lock.shared"}) {
    const int fd =
        ::open(Join(path, name).c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "creating " + Join(path, name));
    ::close(fd);
  }
  return Status::Ok();
}

}  // namespace

namespace internal {
Status CheckNewRepositoryOptions(const InitOptions& o) {
  return CheckInitOptions(o);
}
Result<RepositoryConfig> NewRepositoryConfig(const InitOptions& o) {
  return NewConfig(o);
}
}  // namespace internal

Status Repository::Init(const std::string& path, const InitOptions& o) {
  WB_RETURN_IF_ERROR(InitCrypto());
  if (IsS3Url(path)) return InitS3(path, o);
  bool exists = false;
  WB_RETURN_IF_ERROR(CheckInitTarget(path, o, &exists));
  WB_ASSIGN_OR_RETURN(const RepositoryConfig c, NewConfig(o));
  WB_RETURN_IF_ERROR(MakeLayout(path, exists));
  {
    Repository repo;
    repo.path_ = path;
    repo.config_ = c;
    WB_ASSIGN_OR_RETURN(repo.catalog_, catalog::Catalog::Open(Join(path, kCatalogName), true));
    WB_RETURN_IF_ERROR(repo.WriteSettings());
  }
  ::chmod(Join(path, kCatalogName).c_str(), 0600);
  // config.json last: its presence is what makes the directory a repository.
  return WriteFileAtomic(path, kConfigName, ConfigJson(c));
}

Result<RepositoryConfig> Repository::ReadConfig(const std::string& path) {
  if (IsS3Url(path)) {
    std::string fingerprint;
    WB_ASSIGN_OR_RETURN(std::shared_ptr<S3Objects> s3, internal::OpenS3Objects(path, &fingerprint));
    Result<RepositoryConfig> config = internal::ReadS3Config(*s3);
    if (config.ok()) internal::KeepS3ObjectsForOpen(path, fingerprint, std::move(s3));
    return config;
  }
  const std::string config_path = Join(path, kConfigName);
  // Never through a link or from a FIFO planted in its place (a repository another user owns).
  std::string text;
  const Status read = ReadRegularFileNoFollow(config_path, &text);
  if (read.code() == StatusCode::kNotFound) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return Status::NotFound("no repository at " + path);
    return Status::NotFound(path + " is not a wanbackup repository (no " + kConfigName + ")");
  }
  WB_RETURN_IF_ERROR(read);
  return ParseRepositoryConfig(text, config_path);
}

Result<std::unique_ptr<Repository>> Repository::Open(const std::string& path,
                                                     const Credentials& credentials, OpenMode mode,
                                                     const LockOptions& lock,
                                                     const std::string& cache_dir) {
  WB_RETURN_IF_ERROR(InitCrypto());
  if (IsS3Url(path)) return OpenS3(path, credentials, mode, lock, cache_dir);
  if (mode != OpenMode::kRead && !ReadOnlyDir(path)) WB_RETURN_IF_ERROR(CheckPlaceForWriting(path));
  std::unique_ptr<Repository> repo(new Repository());
  repo->path_ = path;
  repo->store_ = NewLocalPackStore(Join(path, "packs"));
  WB_ASSIGN_OR_RETURN(repo->config_, ReadConfig(path));
  repo->read_only_ = ReadOnlyDir(path);
  repo->reader_ = mode == OpenMode::kRead;
  if (repo->read_only_ && mode != OpenMode::kRead) {
    return Status::PermissionDenied("repository " + path + " is read-only; " + lock.command +
                                    " needs to write to it");
  }
  // A config.json that claims format 1 opens only for migrate, and only as what it says when
  // nothing in the catalog is newer (it may have been turned back to skip its authentication).
  const bool legacy = repo->config_.format < kMinOpenFormat;
  if (legacy) {
    repo->newer_format_evidence_ = repo->NewerFormatEvidence();
    if (mode != OpenMode::kMigrate) return repo->RefuseFormat1();
  }
  // The catalog first: the settings it keeps must vouch for config.json before config.json's
  // KDF parameters are used (a weakened KDF must be refused as such, not as a wrong passphrase).
  if (mode != OpenMode::kRepair && !legacy) {
    WB_RETURN_IF_ERROR(repo->OpenCatalog());
    WB_RETURN_IF_ERROR(repo->CheckSettings());
  }
  WB_RETURN_IF_ERROR(repo->Unlock(credentials));
  const LockKind kind = mode == OpenMode::kRead    ? LockKind::kShared
                        : mode == OpenMode::kWrite ? LockKind::kWriter
                                                   : LockKind::kExclusive;
  WB_ASSIGN_OR_RETURN(repo->lock_, RepoLock::Acquire(path, kind, lock));
  // A format-1 catalog is opened (its schema upgraded) by migrate, once it found nothing newer.
  if (mode == OpenMode::kRepair || legacy) return repo;
  WB_RETURN_IF_ERROR(repo->LoadPacks());
  return repo;
}

Status Repository::OpenLegacyCatalog() {
  if (catalog_) return Status::Ok();
  WB_RETURN_IF_ERROR(OpenCatalog());
  return LoadPacks();
}

std::string Repository::NewerFormatEvidence() const {
  struct stat st {};
  if (::stat(CatalogPath().c_str(), &st) != 0) return "";
  Result<catalog::CatalogProbe> probe = catalog::ProbeCatalog(CatalogPath());
  return probe.ok() ? catalog::NewerThanFormat1(*probe) : "";
}

Status Repository::RefuseFormat1() const {
  if (newer_format_evidence_.empty()) {
    return Status::Unsupported("repository " + path_ + " has format " +
                               std::to_string(config_.format) +
                               ", from before sealed snapshot records; upgrade it once with "
                               "'wanbackup migrate --repo " +
                               path_ + "' (it seals each snapshot; no data is rewritten)");
  }
  return Status::Corruption(
      path_ + "/" + kConfigName + " says format " + std::to_string(config_.format) +
      " (unauthenticated, from before sealed snapshot records), but the repository is newer (" +
      newer_format_evidence_ +
      "): config.json looks downgraded (altered), do not migrate it; put back a config.json you "
      "trust (unless a 'wanbackup migrate' of this repository was interrupted: see 'wanbackup "
      "migrate --help'); nothing was written");
}

Status Repository::Unlock(const Credentials& credentials) {
  if (config_.mode == EncryptionMode::kNone) {
    keys_ = std::make_unique<KeySet>(KeySet::Unencrypted(config_.id));
  } else {
    WB_ASSIGN_OR_RETURN(const SecureKey kek, KekFor(config_, credentials));
    WB_ASSIGN_OR_RETURN(master_, UnwrapKey(config_.wrapped_key, kek, config_.id));
    keys_ = std::make_unique<KeySet>(master_);
  }
  if (config_.format >= 2 && !Authentic(config_, *keys_)) {
    return Status::Corruption(path_ + "/" + kConfigName +
                              " was altered: its authentication code does not match its "
                              "settings (mode, cipher, KDF, chunk size, compression and id are "
                              "bound to the repository's key); nothing was written");
  }
  return Status::Ok();
}

Status Repository::OpenCatalog() {
  const std::string catalog_path = CatalogPath();
  const std::string repair = "; rebuild it from the packs with 'wanbackup repair catalog --repo " +
                             path_ + "' (docs/operations.md)";
  struct stat st {};
  if (::stat(catalog_path.c_str(), &st) != 0) {
    return Status::Corruption(catalog_path + " is missing" + repair);
  }
  // Where nobody can write (a read-only mount, write-protected media, a directory without write
  // permission), only readers get here (Open refuses writers first): read-only, no -shm needed.
  Result<std::unique_ptr<catalog::Catalog>> cat = read_only_
                                                      ? catalog::Catalog::OpenReadOnly(catalog_path)
                                                      : catalog::Catalog::Open(catalog_path, false);
  if (!cat.ok() && reader_ && cat.status().code() == StatusCode::kIoError) {
    // A full filesystem (SQLite could make neither -wal nor -shm there): a reader still lists,
    // verifies and restores, from the catalog file as it stands (what a -wal might add is
    // what a writer could not have committed on a full disk but a moment ago; restore trusts
    // only sealed records anyway).
    Result<std::unique_ptr<catalog::Catalog>> frozen = catalog::Catalog::Peek(catalog_path);
    if (frozen.ok()) cat = std::move(frozen);
  }
  if (!cat.ok()) {
    // Not the catalog's fault: a full disk is not damage, and 'repair catalog' would not help.
    if (cat.status().code() == StatusCode::kBusy ||
        cat.status().code() == StatusCode::kPermissionDenied ||
        cat.status().code() == StatusCode::kUnsupported ||
        cat.status().code() == StatusCode::kIoError) {
      return cat.status();
    }
    const std::string why = cat.status().message();
    return Status::Corruption(catalog_path + " cannot be used (" + why + ")" +
                              (why.find("repair catalog") == std::string::npos ? repair : ""));
  }
  catalog_ = std::move(*cat);
  // A damaged file may open and fail at its first real query (one row: no table scan).
  Result<std::string> probe = catalog_->GetSetting(kSettingId);
  if (!probe.ok() && probe.status().code() == StatusCode::kCorruption) {
    return Status::Corruption(catalog_path + " is damaged (" + probe.status().message() + ")" +
                              repair);
  }
  return probe.status();
}

Status Repository::CheckSettings() {
  const std::string config_path = path_ + "/" + kConfigName;
  WB_ASSIGN_OR_RETURN(std::string id, catalog_->GetSetting(kSettingId));
  if (id.empty()) {
    return Status::Corruption(CatalogPath() +
                              " lacks the repository's settings (it was altered); rebuild it with "
                              "'wanbackup repair catalog --repo " +
                              path_ + "'");
  }
  if (id != config_.id) {
    return Status::Corruption(config_path + " names repository " + config_.id + " but " +
                              CatalogPath() + " belongs to " + id +
                              ": one of them was replaced; nothing was written");
  }
  WB_ASSIGN_OR_RETURN(std::string encrypted, catalog_->GetSetting(kSettingEncrypted));
  const bool config_encrypted = config_.mode != EncryptionMode::kNone;
  if ((encrypted == "1") != config_encrypted) {
    return Status::Corruption(config_path + " says the repository is " +
                              (config_encrypted ? "encrypted" : "not encrypted") +
                              ", but it was created " +
                              (config_encrypted ? "without encryption" : "encrypted") +
                              ": config.json was altered; nothing was written");
  }
  if (!config_encrypted) return CheckPacksUnencrypted();
  if (config_.mode == EncryptionMode::kPassphrase) {
    WB_ASSIGN_OR_RETURN(std::string ops, catalog_->GetSetting(kSettingKdfOps));
    WB_ASSIGN_OR_RETURN(std::string mem, catalog_->GetSetting(kSettingKdfMem));
    if (config_.kdf.opslimit < ParseSetting(ops) || config_.kdf.memlimit < ParseSetting(mem)) {
      return Status::Corruption(
          config_path + " asks for a weaker key derivation (Argon2id ops " +
          std::to_string(config_.kdf.opslimit) + ", " + MiB(config_.kdf.memlimit) +
          ") than this repository was given (ops " + ops + ", " + MiB(ParseSetting(mem)) +
          "): config.json was altered; nothing was written");
    }
  }
  return Status::Ok();
}

// config.json and the catalog say "not encrypted": the packs must agree (their first records).
Status Repository::CheckPacksUnencrypted() {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::PackInfo> packs, catalog_->Packs());
  for (const catalog::PackInfo& p : packs) {
    if (p.size < kPackHeaderSize + kRecordHeaderSize) continue;
    Result<std::unique_ptr<PackReader>> pack = store_->Open(p.name);
    if (!pack.ok()) continue;  // a missing pack is verify's to report
    uint8_t header[kRecordHeaderSize];
    const Status read = (*pack)->ReadAt(kPackHeaderSize, header, sizeof header);
    if (!read.ok()) continue;
    Result<RecordHeader> h = ParseRecordHeader(header);
    if (h.ok() && (h->flags & kRecordEncrypted) != 0) {
      return Status::Corruption(path_ + "/" + kConfigName +
                                " says the repository is not encrypted, but its packs hold "
                                "encrypted records: it was altered; nothing was written");
    }
  }
  return Status::Ok();
}

Status Repository::WriteSettings(catalog::Catalog* into) {
  catalog::Catalog& cat = into != nullptr ? *into : *catalog_;
  WB_ASSIGN_OR_RETURN(auto txn, cat.Begin());
  WB_RETURN_IF_ERROR(cat.PutSetting(kSettingId, config_.id));
  WB_RETURN_IF_ERROR(
      cat.PutSetting(kSettingEncrypted, config_.mode != EncryptionMode::kNone ? "1" : "0"));
  if (config_.mode == EncryptionMode::kPassphrase) {
    WB_RETURN_IF_ERROR(cat.PutSetting(kSettingKdfOps, std::to_string(config_.kdf.opslimit)));
    WB_RETURN_IF_ERROR(cat.PutSetting(kSettingKdfMem, std::to_string(config_.kdf.memlimit)));
  }
  return txn->Commit();
}

Status Repository::UpgradeConfig() {
  if (!writer()) return Status::Internal("UpgradeConfig needs the writer lock");
  RepositoryConfig updated = config_;
  updated.format = kRepositoryFormat;
  updated.authentication = Authenticate(updated, *keys_);
  WB_RETURN_IF_ERROR(WriteConfigFile(updated));
  config_ = updated;
  return Status::Ok();
}

std::string Repository::CatalogPath() const {
  return Join(local_dir(), kCatalogName);
}

Status Repository::InstallCatalog(const std::string& built_path, std::string* kept_as) {
  if (!writer()) return Status::Internal("InstallCatalog needs the writer lock");
  catalog_.reset();
  const std::string target = CatalogPath();
  kept_as->clear();
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    std::string stamp = NowIso8601();
    for (char& ch : stamp) {
      if (ch == ':') ch = '-';
    }
    // Never over an earlier kept catalog (two repairs in one second): -2, -3, ...
    const std::string base = target + ".damaged-" + stamp;
    *kept_as = base;
    for (int n = 2; ::lstat(kept_as->c_str(), &st) == 0; ++n)
      *kept_as = base + "-" + std::to_string(n);
    if (::rename(target.c_str(), kept_as->c_str()) != 0) {
      return Status::FromErrno(errno, "moving the old catalog aside");
    }
  }
  // The old catalog's WAL must never meet the new database.
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = target + suffix;
    if (::stat(side.c_str(), &st) != 0) continue;
    const std::string dest = kept_as->empty() ? side + ".damaged" : *kept_as + suffix;
    if (::rename(side.c_str(), dest.c_str()) != 0) {
      return Status::FromErrno(errno, "moving " + side + " aside");
    }
  }
  if (::rename(built_path.c_str(), target.c_str()) != 0) {
    return Status::FromErrno(errno, "installing the rebuilt catalog");
  }
  WB_RETURN_IF_ERROR(SyncDir(local_dir()));
  WB_ASSIGN_OR_RETURN(catalog_, catalog::Catalog::Open(target, false));
  return LoadPacks();
}

Repository::~Repository() {
  catalog_.reset();
  pack_readers_.clear();
  lock_.reset();  // releases the locks
  s3_lock_.reset();
  if (cache_lock_fd_ >= 0) ::close(cache_lock_fd_);
}

Status Repository::WriteConfigFile(const RepositoryConfig& config) {
  if (s3_) return s3_->Put(kConfigName, ConfigJson(config));
  return WriteFileAtomic(path_, kConfigName, ConfigJson(config));
}

std::string Repository::PackPath(const std::string& name) const {
  return store_->Describe(name);
}

Result<std::unique_ptr<PackWriter>> Repository::NewPackFile(std::string* name) {
  uint8_t raw[16];
  randombytes_buf(raw, sizeof raw);
  *name = ToHex(raw, sizeof raw);
  return store_->Create(*name, config_.id);
}

Result<std::unique_ptr<PackWriter>> Repository::NewPack(int64_t* pack_id) {
  std::string name;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> writer, NewPackFile(&name));
  WB_ASSIGN_OR_RETURN(*pack_id, catalog_->AddPack(name));
  std::lock_guard<std::mutex> lock(packs_mu_);
  pack_names_[*pack_id] = name;
  return writer;
}

// The pack is opened and its header checked without the lock (on object storage those are
// round trips, and restore's workers open many packs at once); a thread that wants a pack
// another is opening waits for that one instead of opening it again, and takes its failure
// too (an unreachable store costs one open's retries, not one per waiting thread).
Result<const PackReader*> Repository::Pack(int64_t pack_id) {
  std::string name;
  {
    std::unique_lock<std::mutex> lock(packs_mu_);
    bool waited = false;
    while (packs_opening_.count(pack_id) != 0) {
      waited = true;
      packs_opened_.wait(lock);
    }
    auto it = pack_readers_.find(pack_id);
    if (it != pack_readers_.end()) return it->second.get();
    if (auto failed = packs_failed_.find(pack_id); waited && failed != packs_failed_.end())
      return failed->second;
    auto named = pack_names_.find(pack_id);
    if (named == pack_names_.end()) {
      return Status::Corruption("pack " + std::to_string(pack_id) + " is not in the catalog");
    }
    name = named->second;
    packs_opening_.insert(pack_id);
  }
  Result<std::unique_ptr<PackReader>> reader = store_->Open(name);
  Status checked =
      reader.ok() ? CheckPackHeader(**reader, config_.id, store_->Describe(name)) : reader.status();
  std::lock_guard<std::mutex> lock(packs_mu_);
  packs_opening_.erase(pack_id);
  packs_opened_.notify_all();
  if (!checked.ok()) {
    packs_failed_.insert_or_assign(pack_id, checked);
    return checked;
  }
  packs_failed_.erase(pack_id);
  return pack_readers_.try_emplace(pack_id, std::move(*reader)).first->second.get();
}

Status Repository::RemovePack(int64_t pack_id, const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(packs_mu_);
    pack_readers_.erase(pack_id);
    pack_names_.erase(pack_id);
  }
  return store_->Remove(name);
}

Status Repository::LoadPacks() {
  WB_ASSIGN_OR_RETURN(std::vector<catalog::PackInfo> packs, catalog_->Packs());
  std::lock_guard<std::mutex> lock(packs_mu_);
  for (const catalog::PackInfo& p : packs)
    pack_names_[p.id] = p.name;
  return Status::Ok();
}

Result<KdfParams> Repository::PassphraseCost() {
  if (config_.mode == EncryptionMode::kPassphrase) return config_.kdf;
  // Under a key file config.json holds no cost, but the catalog keeps the floor an earlier
  // passphrase was given: a new passphrase starts there, or the cost would fall by going to a
  // key file and back.
  KdfParams cost;
  WB_ASSIGN_OR_RETURN(const std::string ops, catalog_->GetSetting(kSettingKdfOps));
  WB_ASSIGN_OR_RETURN(const std::string mem, catalog_->GetSetting(kSettingKdfMem));
  cost.opslimit = std::max(cost.opslimit, ParseSetting(ops));
  cost.memlimit = std::max(cost.memlimit, ParseSetting(mem));
  return cost;
}

Status Repository::ChangeKey(EncryptionMode mode, const Credentials& credentials,
                             const std::optional<KdfParams>& kdf) {
  if (!writer()) return Status::Internal("ChangeKey needs the repository opened for writing");
  if (config_.mode == EncryptionMode::kNone || mode == EncryptionMode::kNone) {
    return Status::Unsupported(
        "an unencrypted repository cannot get a key, nor an encrypted one "
        "lose its own");
  }
  // config.json was read before the writer lock was ours: another key change may have
  // rewritten it since, and writing ours over it would silently drop the key it just set.
  WB_ASSIGN_OR_RETURN(const RepositoryConfig now, ReadConfig(path_));
  if (ConfigJson(now) != ConfigJson(config_)) {
    return Status::Busy(path_ + "/" + kConfigName +
                        " changed while this command waited for the repository's lock (another "
                        "'key change'?); nothing was written: run it again with the key now in "
                        "use");
  }
  RepositoryConfig updated = config_;
  updated.mode = mode;
  SecureKey kek;
  if (mode == EncryptionMode::kPassphrase) {
    WB_ASSIGN_OR_RETURN(const KdfParams current, PassphraseCost());
    updated.kdf = NewKdfParams();
    updated.kdf.opslimit = current.opslimit;
    updated.kdf.memlimit = current.memlimit;
    if (kdf.has_value()) {
      WB_RETURN_IF_ERROR(CheckKdfRaise(current, *kdf));
      updated.kdf.opslimit = kdf->opslimit;
      updated.kdf.memlimit = kdf->memlimit;
    }
    WB_ASSIGN_OR_RETURN(kek, KeyFromPassphrase(credentials.passphrase, updated.kdf));
  } else {
    if (kdf.has_value()) return Status::InvalidArgument("a KDF cost applies to passphrases only");
    if (credentials.key_file.empty()) return Status::InvalidArgument("--new-key-file is required");
    WB_RETURN_IF_ERROR(CreateKeyFileIfMissing(credentials.key_file));
    WB_ASSIGN_OR_RETURN(Secret contents, ReadKeyFile(credentials.key_file));
    WB_ASSIGN_OR_RETURN(kek, KeyFromKeyFile(contents));
  }
  updated.wrapped_key = WrapKey(master_, kek, config_.id);
  updated.authentication = Authenticate(updated, *keys_);
  // The catalog's KDF floor may never exceed what config.json holds, even if we crash between
  // the two writes: lower it to the smaller of old and new first, then set it to the new.
  if (mode == EncryptionMode::kPassphrase) {
    RepositoryConfig floor = updated;
    if (config_.mode == EncryptionMode::kPassphrase) {
      floor.kdf.opslimit = std::min(config_.kdf.opslimit, updated.kdf.opslimit);
      floor.kdf.memlimit = std::min(config_.kdf.memlimit, updated.kdf.memlimit);
    }
    std::swap(config_, floor);
    Status s = WriteSettings();
    std::swap(config_, floor);
    WB_RETURN_IF_ERROR(s);
  }
  // The new key (a key file made above) is durable; the old one unlocks until config.json is
  // replaced whole: a rename in a directory, one PUT on S3.
  WB_FAILPOINT("key-change.before-config");
  WB_RETURN_IF_ERROR(WriteConfigFile(updated));
  WB_FAILPOINT("key-change.after-config");
  config_ = updated;
  return WriteSettings();
}

}  // namespace wanbackup::pipeline
