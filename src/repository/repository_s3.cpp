// A repository on S3 (docs/format.md, "A repository on S3"): config.json and the packs are
// objects; the catalog is a cache in a local directory, refreshed from the packs' sealed records
// whenever it lacks what the store holds (cache_refresh.h); the lock files are the cache
// directory's.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <utility>

#include <sodium.h>

#include "repository/cache_refresh.h"
#include "repository/catalog_rebuild.h"
#include "repository/internal/config_json.h"
#include "repository/repository.h"
#include "repository/repository_place.h"
#include "repository/s3_lock.h"
#include "store/fs_util.h"
#include "store/s3_objects.h"
#include "store/s3_url.h"

namespace wanbackup::pipeline {
namespace {

constexpr const char kS3ConfigName[] = "config.json";
constexpr const char kRefreshLock[] = "refresh.lock";

// Makes `dir` and any missing directory above it, each mode 0700.
Status MakeCacheDirs(const std::string& dir) {
  for (size_t at = 1; at != std::string::npos;) {
    at = dir.find('/', at + 1);
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "creating the cache directory " + part);
    }
  }
  return Status::Ok();
}

// What the cache must do to follow the store: nothing, when it names every pack the store holds
// and none is larger in the store than it knows it. Another host that wrote adds packs; one that
// pruned removes some; and a pack uploaded again, longer (earlier versions put each new pack up
// with its header alone, then whole), leaves a cache refreshed in between knowing the header
// only, while the pack now holds a snapshot — which such a cache would not list, and its prune
// would remove with the pack.
Result<CacheRefreshPlan> PlanRefresh(catalog::Catalog& cat, PackStore& store) {
  WB_ASSIGN_OR_RETURN(std::vector<StoredPack> stored, store.List());
  WB_ASSIGN_OR_RETURN(std::vector<catalog::PackInfo> known, cat.Packs());
  WB_ASSIGN_OR_RETURN(const std::string examined, cat.GetSetting(kCacheExaminedPacks));
  return PlanCacheRefresh(known, stored, ParseExaminedPacks(examined));
}

// The objects (client and connections) of the last config.json read, for the next open of the
// same URL with the same credentials in this process: a command reads config.json to learn
// how the repository is unlocked, then opens it, and the open reuses the connection (a TCP
// handshake, one round trip, saved). Taken once; never freed (reachable until exit).
struct KeptObjects {
  std::mutex mu;
  std::string url;                     // GUARDED_BY(mu)
  std::string fingerprint;             // GUARDED_BY(mu)
  std::shared_ptr<S3Objects> objects;  // GUARDED_BY(mu)
};

KeptObjects& Kept() {
  static KeptObjects* const kept = new KeptObjects;
  return *kept;
}

// Which credentials: the key id, the region and a hash of the secret (never the secret).
std::string CredentialsFingerprint(const S3Credentials& c) {
  unsigned char hash[crypto_generichash_BYTES];
  const std::string_view secret = c.secret_access_key.reveal();
  crypto_generichash(hash, sizeof hash, reinterpret_cast<const unsigned char*>(secret.data()),
                     secret.size(), nullptr, 0);
  return c.access_key_id + "\n" + c.region + "\n" +
         std::string(reinterpret_cast<const char*>(hash), sizeof hash);
}

}  // namespace

namespace internal {

Result<std::shared_ptr<S3Objects>> OpenS3Objects(const std::string& url, std::string* fingerprint) {
  WB_ASSIGN_OR_RETURN(const S3Location location, ParseS3Url(url));
  WB_ASSIGN_OR_RETURN(S3Credentials credentials, S3CredentialsFromEnvironment());
  const std::string used = CredentialsFingerprint(credentials);
  if (fingerprint != nullptr) *fingerprint = used;
  {
    // Taken when it fits, dropped when it does not: objects kept for another URL or other
    // credentials (a job runner's previous job) hold their secret no longer than this.
    KeptObjects& kept = Kept();
    std::lock_guard<std::mutex> lock(kept.mu);
    std::shared_ptr<S3Objects> objects = std::exchange(kept.objects, nullptr);
    const bool fits = objects && kept.url == url && kept.fingerprint == used;
    kept.url.clear();
    kept.fingerprint.clear();
    if (fits) return objects;
  }
  return S3Objects::Open(location, std::move(credentials));
}

void KeepS3ObjectsForOpen(const std::string& url, const std::string& fingerprint,
                          std::shared_ptr<S3Objects> objects) {
  KeptObjects& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mu);
  kept.url = url;
  kept.fingerprint = fingerprint;
  kept.objects = std::move(objects);
}

Result<RepositoryConfig> ReadS3Config(S3Objects& s3) {
  Result<std::string> text = s3.Get(kS3ConfigName);
  if (text.status().code() == StatusCode::kNotFound) {
    WB_RETURN_IF_ERROR(s3.CheckBucket());
    return Status::NotFound("no repository at " + s3.location().ToString() + " (no " +
                            kS3ConfigName + ")");
  }
  WB_RETURN_IF_ERROR(text.status());
  return ParseRepositoryConfig(*text, s3.Describe(kS3ConfigName));
}

}  // namespace internal

std::string DefaultCacheDir(const std::string& repository_id) {
  if (::geteuid() == 0) return "/var/cache/wanbackup/" + repository_id;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/wanbackup/" + repository_id;
  const char* home = std::getenv("HOME");
  const std::string base = home != nullptr && home[0] == '/' ? home : "/tmp";
  return base + "/.cache/wanbackup/" + repository_id;
}

Status PrepareCacheDir(const std::string& dir, const std::string& what) {
  WB_RETURN_IF_ERROR(MakeCacheDirs(dir));
  // The cache is written by readers too: it must be a place nobody else can change.
  return CheckPlaceForWriting(dir).WithContext(what);
}

Status Repository::InitS3(const std::string& url, const InitOptions& o) {
  WB_RETURN_IF_ERROR(internal::CheckNewRepositoryOptions(o));
  WB_ASSIGN_OR_RETURN(std::shared_ptr<S3Objects> s3, internal::OpenS3Objects(url));
  const std::string where = s3->location().ToString();
  WB_RETURN_IF_ERROR(s3->CheckBucket());
  WB_ASSIGN_OR_RETURN(const std::vector<S3Object> there, s3->List(""));
  for (const S3Object& object : there) {
    if (object.name == kS3ConfigName)
      return Status::AlreadyExists(where + " already holds a repository");
  }
  if (!there.empty()) {
    return Status::AlreadyExists(where + " is not empty (" + std::to_string(there.size()) +
                                 " objects); give a new bucket or prefix");
  }
  WB_ASSIGN_OR_RETURN(const RepositoryConfig c, internal::NewRepositoryConfig(o));
  // Only if no other init got there first: config.json is what makes the prefix a repository.
  Status made = s3->Create(kS3ConfigName, internal::ConfigJson(c));
  if (made.code() == StatusCode::kAlreadyExists) {
    return Status::AlreadyExists(where + " already holds a repository");
  }
  return made;
}

Result<std::unique_ptr<Repository>> Repository::OpenS3(const std::string& url,
                                                       const Credentials& credentials,
                                                       OpenMode mode, const LockOptions& lock,
                                                       const std::string& cache_dir) {
  WB_ASSIGN_OR_RETURN(std::shared_ptr<S3Objects> s3, internal::OpenS3Objects(url));
  std::unique_ptr<Repository> repo(new Repository());
  repo->s3_ = s3;
  repo->path_ = s3->location().ToString();
  WB_ASSIGN_OR_RETURN(repo->config_, internal::ReadS3Config(*s3));
  if (repo->config_.format < kMinOpenFormat || mode == OpenMode::kMigrate) {
    return Status::Unsupported("repository " + repo->path_ + " has format " +
                               std::to_string(repo->config_.format) +
                               ": an S3 repository is made at the current format and needs no "
                               "migration");
  }
  repo->store_ = s3->Packs();
  repo->reader_ = mode == OpenMode::kRead;
  repo->cache_dir_ = cache_dir.empty() ? DefaultCacheDir(repo->config_.id) : cache_dir;
  WB_RETURN_IF_ERROR(PrepareCacheDir(repo->cache_dir_, "the catalog cache of " + repo->path_));
  WB_RETURN_IF_ERROR(repo->Unlock(credentials));
  const LockKind kind = mode == OpenMode::kRead    ? LockKind::kShared
                        : mode == OpenMode::kWrite ? LockKind::kWriter
                                                   : LockKind::kExclusive;
  WB_ASSIGN_OR_RETURN(repo->lock_, RepoLock::Acquire(repo->cache_dir_, kind, lock));
  // This host's locks first (cheap, and they keep this host's commands in order), then the
  // bucket's; the cache is refreshed under both, so a writer sees every other host's last write.
  WB_ASSIGN_OR_RETURN(repo->s3_lock_, S3RepoLock::Acquire(s3, kind, lock));
  WB_RETURN_IF_ERROR(repo->OpenCache(mode, lock));
  if (mode == OpenMode::kRepair) return repo;
  WB_RETURN_IF_ERROR(repo->LoadPacks());
  return repo;
}

// Every process that uses the cache holds CACHE/refresh.lock shared while it runs; the cache's
// catalog is refreshed (in one transaction) or rebuilt (a new file renamed over it) only under
// the exclusive lock, so never under a process that has it open. A process that cannot have the
// exclusive lock (another command on this host is running) uses the catalog as it is, unless it
// must write to the repository and the catalog lacks packs the store holds.
Status Repository::OpenCache(OpenMode mode, const LockOptions& lock) {
  const std::string lock_path = cache_dir_ + "/" + kRefreshLock;
  cache_lock_fd_ =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (cache_lock_fd_ < 0) return Status::FromErrno(errno, "opening " + lock_path);
  const bool alone = ::flock(cache_lock_fd_, LOCK_EX | LOCK_NB) == 0;
  const std::string busy = "the catalog cache " + cache_dir_ +
                           " is in use by another wanbackup command on this host, and " +
                           lock.command + " needs it refreshed from the repository first";
  if (mode == OpenMode::kRepair) {
    if (!alone) return Status::Busy(busy + "; try again when it ends");
    return Status::Ok();
  }
  struct stat st {};
  if (alone) {
    CacheRefreshPlan plan;
    if (::stat(CatalogPath().c_str(), &st) != 0) {
      plan.kind = CacheRefreshPlan::Kind::kFull;
      plan.why = "there was none";
    } else {
      WB_RETURN_IF_ERROR(OpenCatalog());
      WB_RETURN_IF_ERROR(CheckSettings());
      WB_ASSIGN_OR_RETURN(plan, PlanRefresh(*catalog_, *store_));
      catalog_.reset();
    }
    if (plan.kind != CacheRefreshPlan::Kind::kFresh) {
      WB_ASSIGN_OR_RETURN(const RebuildReport refreshed, RefreshCacheCatalog(*this, plan));
      if (lock.on_info) lock.on_info(DescribeCacheRefresh(refreshed));
    }
    // From exclusive to shared (not atomic: another process may rebuild in between, and the
    // catalog is opened only after).
    if (::flock(cache_lock_fd_, LOCK_SH) != 0) return Status::FromErrno(errno, lock_path);
    WB_RETURN_IF_ERROR(OpenCatalog());
    return CheckSettings();
  }
  if (::flock(cache_lock_fd_, LOCK_SH) != 0) return Status::FromErrno(errno, lock_path);
  if (::stat(CatalogPath().c_str(), &st) != 0) return Status::Busy(busy + "; try again");
  WB_RETURN_IF_ERROR(OpenCatalog());
  WB_RETURN_IF_ERROR(CheckSettings());
  if (mode != OpenMode::kRead) {
    WB_ASSIGN_OR_RETURN(const CacheRefreshPlan plan, PlanRefresh(*catalog_, *store_));
    if (plan.kind != CacheRefreshPlan::Kind::kFresh) {
      return Status::Busy(busy + "; try again when it ends");
    }
  }
  return Status::Ok();
}

Status Repository::InstallCacheCatalog(const std::string& built_path) {
  catalog_.reset();
  const std::string target = CatalogPath();
  for (const char* suffix : {"-wal", "-shm"}) {
    if (::unlink((target + suffix).c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno(errno, "removing " + target + suffix);
    }
  }
  if (::rename(built_path.c_str(), target.c_str()) != 0) {
    return Status::FromErrno(errno, "installing the rebuilt catalog cache " + target);
  }
  return SyncDir(cache_dir_);
}

}  // namespace wanbackup::pipeline
