#include "jobs/job_history.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "repository/repository.h"
#include "store/s3_url.h"

namespace wanbackup::jobs {
namespace {

constexpr const char kPendingDir[] = "job-runs.pending";

std::string ThisHost() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Field 22 of /proc/PID/stat (after the command name in parentheses, which may hold spaces).
int64_t StartTime(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {  // fields 3.. follow the name
    if (!(fields >> field)) return 0;
  }
  return std::strtoll(field.c_str(), nullptr, 10);
}

bool ProcessGone(const catalog::JobRun& run) {
  if (run.status != "running" || run.host != ThisHost() || run.pid <= 0) return false;
  if (::kill(static_cast<pid_t>(run.pid), 0) != 0) return errno == ESRCH;
  // Alive: the same process only if it started when the run's did.
  return run.pid_started != 0 && StartTime(run.pid) != run.pid_started;
}

// A dead run's status: what its recorded steps say, since it could not say it itself.
void CloseDead(catalog::JobRun* run) {
  run->status = "interrupted";
  const nlohmann::json steps = nlohmann::json::parse(run->steps, nullptr, false);
  if (!steps.is_array()) return;
  for (const nlohmann::json& s : steps) {
    if (s.is_object() && s.value("status", "") == "failed") {
      run->status = "failed";
      if (run->error.empty()) run->error = s.value("step", "") + ": " + s.value("summary", "");
      return;
    }
  }
}

nlohmann::json ToJson(const catalog::JobRun& r) {
  return {{"id", r.id},
          {"job", r.job},
          {"started", r.started_unix_ms},
          {"finished", r.finished_unix_ms},
          {"status", r.status},
          {"pid", r.pid},
          {"pid_started", r.pid_started},
          {"host", r.host},
          {"snapshot_id", r.snapshot_id},
          {"bytes", r.bytes},
          {"steps", r.steps},
          {"error", r.error}};
}

bool FromJson(const std::string& text, catalog::JobRun* r) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  try {
    r->id = j.at("id").get<int64_t>();
    r->job = j.at("job").get<std::string>();
    r->started_unix_ms = j.at("started").get<int64_t>();
    r->finished_unix_ms = j.at("finished").get<int64_t>();
    r->status = j.at("status").get<std::string>();
    r->pid = j.at("pid").get<int64_t>();
    r->pid_started = j.at("pid_started").get<int64_t>();
    r->host = j.at("host").get<std::string>();
    r->snapshot_id = j.at("snapshot_id").get<int64_t>();
    r->bytes = j.at("bytes").get<uint64_t>();
    r->steps = j.at("steps").get<std::string>();
    r->error = j.at("error").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

// The pending files' names and rows.
std::vector<std::pair<std::string, catalog::JobRun>> PendingRuns(const std::string& dir) {
  std::vector<std::pair<std::string, catalog::JobRun>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    std::string path = dir;
    path.append("/").append(name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text(64 << 10, '\0');
    const ssize_t n = ::read(fd, text.data(), text.size());
    ::close(fd);
    catalog::JobRun run;
    if (n > 0 && FromJson(text.substr(0, static_cast<size_t>(n)), &run)) {
      out.emplace_back(path, run);
    }
  }
  ::closedir(d);
  return out;
}

}  // namespace

int64_t OwnStartTime() {
  return StartTime(::getpid());
}

Result<HistoryPlace> HistoryPlaceOf(const RepositoryConfig& repository) {
  HistoryPlace place;
  if (!pipeline::IsS3Url(repository.path)) {
    place.dir = repository.path;
    place.file = repository.path + "/" + pipeline::kCatalogFile;
    return place;
  }
  place.own_file = true;
  place.dir = repository.cache_dir;
  const char* env = std::getenv("WANBACKUP_CACHE_DIR");
  if (place.dir.empty() && env != nullptr) place.dir = env;
  if (place.dir.empty()) {
    std::string id = repository.repository_id;
    if (id.empty()) {
      WB_ASSIGN_OR_RETURN(const pipeline::RepositoryConfig config,
                          pipeline::Repository::ReadConfig(repository.path));
      id = config.id;
    }
    place.dir = pipeline::DefaultCacheDir(id);
  }
  place.file = place.dir + "/" + kHistoryFile;
  return place;
}

RunHistory::RunHistory(const HistoryPlace& place, std::chrono::milliseconds busy_timeout,
                       Reporter& reporter, bool create)
    : place_(place), reporter_(reporter) {
  if (place.own_file) {
    if (create) {
      if (Status s = pipeline::PrepareCacheDir(place.dir, "job history"); !s.ok()) {
        reporter_.Warning("job history: " + s.message() + "; this run is not in the history");
        place_.dir.clear();  // nothing is written there, pending rows neither
        return;
      }
    }
    Result<std::unique_ptr<catalog::JobRunStore>> file =
        catalog::JobRunStore::OpenFile(place.file, create, busy_timeout);
    if (file.ok()) {
      store_ = std::move(*file);
    } else if (file.status().code() != StatusCode::kNotFound) {
      reporter_.Warning("job history: " + file.status().message());
    }
    return;
  }
  Result<std::unique_ptr<catalog::Catalog>> cat =
      catalog::Catalog::Open(place.file, false, busy_timeout);
  // A repository nobody can write (a read-only mount) still shows its history.
  if (!cat.ok()) cat = catalog::Catalog::OpenReadOnly(place.file);
  if (cat.ok()) store_ = std::move(*cat);
}

std::string RunHistory::PendingDir() const {
  return place_.dir + "/" + kPendingDir;
}

void RunHistory::ImportPending() {
  for (auto& [path, run] : PendingRuns(PendingDir())) {
    Status s = run.id != 0 ? store_->UpdateJobRun(run) : Status::NotFound("");
    if (s.code() == StatusCode::kNotFound) {  // never had a row, or it was trimmed since
      run.id = 0;
      s = store_->AddJobRun(run).status();
    }
    if (s.ok()) ::unlink(path.c_str());
  }
}

std::vector<catalog::JobRun> RunHistory::Runs(const std::string& job, int limit) {
  if (!store_) return {};
  ImportPending();
  Result<std::vector<catalog::JobRun>> runs = store_->JobRuns(job, limit);
  if (!runs.ok()) return {};
  // Rows the file could not take yet (it is busy): shown all the same.
  for (const auto& pending : PendingRuns(PendingDir())) {
    const catalog::JobRun& run = pending.second;
    if (!job.empty() && run.job != job) continue;
    std::erase_if(*runs, [&](const catalog::JobRun& r) { return run.id != 0 && r.id == run.id; });
    runs->push_back(run);
  }
  std::sort(runs->begin(), runs->end(), [](const catalog::JobRun& a, const catalog::JobRun& b) {
    return a.started_unix_ms != b.started_unix_ms ? a.started_unix_ms > b.started_unix_ms
                                                  : a.id > b.id;
  });
  if (runs->size() > static_cast<size_t>(limit)) runs->resize(static_cast<size_t>(limit));
  for (catalog::JobRun& r : *runs) {
    if (!ProcessGone(r)) continue;
    CloseDead(&r);
    if (r.id != 0) (void)store_->UpdateJobRun(r);  // closed for good; a pending one stays as is
  }
  return *runs;
}

void RunHistory::Write(catalog::JobRun* run) {
  if (!store_ || busy_) return;
  Status s;
  if (run->id == 0) {
    Result<int64_t> id = store_->AddJobRun(*run);
    if (id.ok()) run->id = *id;
    s = id.status();
  } else {
    s = store_->UpdateJobRun(*run);
  }
  busy_ = s.code() == StatusCode::kBusy;
  if (!s.ok() && !busy_) reporter_.Warning("job history: " + s.message());
}

void RunHistory::Finish(catalog::JobRun* run) {
  if (store_) {
    Status s = run->id == 0 ? store_->AddJobRun(*run).status() : store_->UpdateJobRun(*run);
    if (s.ok()) return;
  }
  if (place_.dir.empty()) return;  // its place was refused, and said so
  // The history cannot take it now: a file of its own, never one that is already there.
  const std::string dir = PendingDir();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    reporter_.Warning("job history: " + Status::FromErrno(errno, "creating " + dir).message());
    return;
  }
  const std::string name =
      dir + "/" + std::to_string(run->started_unix_ms) + "-" + std::to_string(run->pid);
  const std::string text = ToJson(*run).dump();
  const int fd =
      ::open((name + ".tmp").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const bool written = fd >= 0 &&
                       ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!written || ::rename((name + ".tmp").c_str(), (name + ".json").c_str()) != 0) {
    if (fd >= 0) ::unlink((name + ".tmp").c_str());
    reporter_.Warning("job history: " + Status::FromErrno(written ? errno : err, name).message() +
                      "; this run is not in the history");
    return;
  }
  reporter_.Info(
      std::string("job history: ") + (place_.own_file ? "the history file" : "the catalog") +
      " is busy; this run is kept in " + name + ".json until the next 'wanbackup jobs' or run");
}

}  // namespace wanbackup::jobs
