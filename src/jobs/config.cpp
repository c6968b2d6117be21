#include "jobs/config.h"

#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <utility>

#include "common/file_trust.h"
#include "common/read_file.h"
#include "common/units.h"
#include "guard/identity.h"
#include "initiator/autotune.h"
#include "initiator/iscsi_url.h"
#include "pipeline/snapshotter.h"
#include "repository/prune_plan.h"
#include "repository/repository.h"
#include "repository/trust_anchor.h"
#include "store/s3_url.h"

namespace wanbackup::jobs {
namespace {

constexpr const char kExample[] = " (every key: conf/wanbackup.toml.example)";

// Where an error is: "FILE:LINE: KEY: ".
class Place {
 public:
  Place(std::string file, const toml::node& node, std::string key)
      : file_(std::move(file)), line_(node.source().begin.line), key_(std::move(key)) {}
  Status Error(const std::string& why) const {
    return Status::InvalidArgument(file_ + ":" + std::to_string(line_) + ": " + key_ + ": " + why);
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  uint32_t line_;
  std::string key_;
};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

Status UnknownKey(const Place& at, const std::string& key, const std::vector<std::string>& known) {
  for (const std::string& k : known) {
    if (EditDistance(key, k) <= 2) return at.Error("unknown key (did you mean '" + k + "'?)");
  }
  return at.Error(std::string("unknown key") + kExample);
}

// A credential file: an absolute path CheckTrustedFile accepts (as every credential loader).
Status CheckSecretFile(const Place& at, const std::string& path) {
  if (path.empty() || path[0] != '/') return at.Error("'" + path + "' must be an absolute path");
  const Status trusted = CheckTrustedFile(path, TrustedFile::kSecret);
  if (!trusted.ok()) return at.Error(trusted.message());
  return Status::Ok();
}

// The text of the config file, read through the one descriptor CheckTrustedFile judged (never
// a second lookup by name). A file it refuses is a bad config (exit 2), as its keys' errors are.
Result<std::string> ReadConfigFile(const std::string& path) {
  Result<std::string> text = ReadTrustedFile(path, TrustedFile::kConfig);
  if (text.status().code() == StatusCode::kNotFound) {
    return Status::NotFound("config file " + path + " does not exist (give --config FILE or set $" +
                            kConfigEnv + "; an example: conf/wanbackup.toml.example)");
  }
  if (text.status().code() == StatusCode::kPermissionDenied) {
    return Status::InvalidArgument(text.status().message());
  }
  return text;
}

using Handler = std::function<Status(const Place&, const toml::node&)>;
using Handlers = std::vector<std::pair<std::string, Handler>>;

Status ReadTable(const std::string& file, const std::string& prefix, const toml::table& table,
                 const Handlers& handlers) {
  std::vector<std::string> known;
  for (const auto& [name, handler] : handlers)
    known.push_back(name);
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const Place at(file, node, prefix + name);
    const auto it = std::find_if(handlers.begin(), handlers.end(),
                                 [&](const auto& h) { return h.first == name; });
    if (it == handlers.end()) return UnknownKey(at, name, known);
    WB_RETURN_IF_ERROR(it->second(at, node));
  }
  return Status::Ok();
}

// Handlers that store a value after a check.
Handler String(std::string* out, std::function<Status(const std::string&)> check = nullptr) {
  return [out, check = std::move(check)](const Place& at, const toml::node& node) -> Status {
    const std::optional<std::string> v = node.value_exact<std::string>();
    if (!v) return at.Error("must be a string (in quotes)");
    if (check) {
      if (Status s = check(*v); !s.ok()) return at.Error(s.message());
    }
    *out = *v;
    return Status::Ok();
  };
}

Handler Integer(int* out, int lo, int hi) {
  return [out, lo, hi](const Place& at, const toml::node& node) -> Status {
    const std::optional<int64_t> v = node.value_exact<int64_t>();
    if (!v) return at.Error("must be a whole number");
    if (*v < lo || *v > hi) {
      return at.Error("must lie from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    *out = static_cast<int>(*v);
    return Status::Ok();
  };
}

Handler SecretFile(std::string* out) {
  return [out](const Place& at, const toml::node& node) -> Status {
    const std::optional<std::string> v = node.value_exact<std::string>();
    if (!v) return at.Error("must be a string (the path of a file that holds the secret)");
    WB_RETURN_IF_ERROR(CheckSecretFile(at, *v));
    *out = *v;
    return Status::Ok();
  };
}

// The form of a TCP congestion control name (whether this host offers it is checked when the
// job runs, as for --congestion-control).
Status CongestionControlName(const std::string& v) {
  const bool ok = !v.empty() && v.size() < 16 && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  return ok ? Status::Ok()
            : Status::InvalidArgument(
                  "must name a TCP congestion control, such as \"cubic\" "
                  "or \"bbr\"");
}

// As --limit-rate (cli/tuning_flags.cpp): the run refuses less than 4K a second.
Status LimitRate(const std::string& v) {
  WB_ASSIGN_OR_RETURN(const uint64_t rate, ParseByteRate(v));
  if (rate != 0 && rate < 4096) {
    return Status::InvalidArgument("must be at least 4K per second (or unlimited)");
  }
  return Status::Ok();
}

Status Duration(const std::string& v) {
  return ParseDuration(v, "s").status();
}
Status Size(const std::string& v) {
  return ParseSize(v).status();
}

Status PositiveSize(const std::string& v) {
  WB_ASSIGN_OR_RETURN(const uint64_t bytes, ParseSize(v));
  return bytes > 0 ? Status::Ok() : Status::InvalidArgument("must be more than 0");
}

// A repository's name only labels it in this file.
Status RepositoryName(const std::string& name) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (ok) return Status::Ok();
  return Status::InvalidArgument("a name of letters, digits, '-', '_' and '.' only");
}

// A job's name becomes a systemd instance name, an /etc/cron.d file name and an argument of
// `wanbackup run`: ^[A-Za-z0-9_][A-Za-z0-9_-]*$. No dot: Debian's cron ignores /etc/cron.d
// files whose names hold one; no leading '-': `run -n` is an option, not a job.
Status JobName(const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  const bool ok =
      !name.empty() && name.size() <= 64 && word(name[0]) &&
      std::all_of(name.begin(), name.end(), [&](char c) { return word(c) || c == '-'; });
  if (ok) return Status::Ok();
  std::string why = "a job's name is 1 to 64 letters, digits, '_' and '-', not starting with '-'";
  if (name.find('.') != std::string::npos) {
    why += " (no '.': Debian's cron ignores /etc/cron.d files whose names hold one)";
  } else if (!name.empty() && name[0] == '-') {
    why += " (it would read as an option of 'wanbackup run')";
  }
  return Status::InvalidArgument(why + "; it names systemd units and cron files");
}

// Syntax only: a schedule that can no longer elapse is a warning of that job (NextElapse).
Status Schedule(const std::string& text) {
  return ParseCalendar(text).status();
}

Status Source(const std::string& source) {
  if (source.rfind("iscsi://", 0) == 0) {
    const std::string authority = source.substr(8, source.find('/', 8) - 8);
    const size_t at = authority.find('@');
    if (at != std::string::npos && authority.substr(0, at).find('%') != std::string::npos) {
      return Status::InvalidArgument(
          "no secrets in the config file: give the CHAP user as chap_user and the secret in "
          "a file named by chap_secret_file");
    }
    // As the run parses it, so that a dry run catches what the run would refuse.
    return initiator::ParseLunUrl(source).status();
  }
  if (source.empty() || source[0] != '/') {
    return Status::InvalidArgument(
        "expected iscsi://host[:port]/target-iqn/lun or an absolute "
        "path of a file or block device");
  }
  return Status::Ok();
}

// config.json's repository_id, as `init` makes it: 32 lowercase hexadecimal digits.
Status RepositoryId(const std::string& id) {
  const bool ok = id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
                    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                  });
  if (ok) return Status::Ok();
  return Status::InvalidArgument(
      "must be a repository id: 32 lowercase hexadecimal digits, as 'wanbackup snapshots "
      "--repo DIR' or config.json's repository_id shows it");
}

Handler Boolean(bool* out) {
  return [out](const Place& at, const toml::node& node) -> Status {
    const std::optional<bool> v = node.value_exact<bool>();
    if (!v) return at.Error("must be true or false (without quotes)");
    *out = *v;
    return Status::Ok();
  };
}

// A directory, or an S3 URL as --repo takes it (its keys never in it: ParseS3Url refuses them).
Status RepositoryPath(const std::string& path) {
  if (pipeline::IsS3Url(path)) return pipeline::ParseS3Url(path).status();
  if (!path.empty() && path[0] == '/') return Status::Ok();
  return Status::InvalidArgument(
      "must be an absolute path or an S3 URL (s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX])");
}

Status AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return Status::Ok();
  return Status::InvalidArgument("'" + path + "' must be an absolute path");
}

Handlers RepositoryHandlers(RepositoryConfig* r) {
  return {
      {"path", String(&r->path, RepositoryPath)},
      {"password_file", SecretFile(&r->password_file)},
      {"key_file", SecretFile(&r->key_file)},
      {"repository_id", String(&r->repository_id, RepositoryId)},
      {"insecure_no_encryption", Boolean(&r->insecure_no_encryption)},
      {"s3_credentials_file", SecretFile(&r->s3_credentials_file)},
      {"cache_dir", String(&r->cache_dir, AbsolutePath)},
      {"upload_memory", String(&r->upload_memory, PositiveSize)},
  };
}

// The keys only an S3 repository takes.
Status CheckS3Keys(const std::string& file, const toml::table& table, const RepositoryConfig& r) {
  if (pipeline::IsS3Url(r.path)) return Status::Ok();
  for (const char* key : {"s3_credentials_file", "cache_dir", "upload_memory"}) {
    if (const toml::node* node = table.get(key)) {
      return Place(file, *node, "repositories." + r.name + "." + key)
          .Error("is for a repository on S3, and path is a directory");
    }
  }
  return Status::Ok();
}

Handler KeepCount(int* out) {
  return Integer(out, 1, 100000);
}

Handler VerifyShare(double* out) {
  return [out](const Place& at, const toml::node& node) -> Status {
    std::optional<double> v = node.value<double>();  // an integer (0, 1) reads as a double too
    if (const std::optional<std::string> text = node.value_exact<std::string>()) {
      Result<double> parsed = ParseFraction(*text);
      if (!parsed.ok()) return at.Error(parsed.status().message());
      v = *parsed;
    }
    // NaN fails every comparison: test for the good range, not the bad one.
    const bool in_range = v && (*v == 0 || (*v >= kMinVerifyShare * (1 - 1e-9) && *v <= 1));
    if (!in_range) {
      return at.Error(
          "must be 0 (no verify step) or a share from 0.0001 (1 in 10,000 per run) to 1, "
          "as a number (0.1) or a percentage (\"10%\")");
    }
    *out = *v;
    return Status::Ok();
  };
}

// A list of strings, each passing `check` when given; `example` shows the form in errors.
Handler StringList(std::vector<std::string>* out, const char* example,
                   std::function<Status(const std::string&)> check = nullptr) {
  return
      [out, example, check = std::move(check)](const Place& at, const toml::node& node) -> Status {
        const std::string form = std::string("must be a list of strings: ") + example;
        const toml::array* list = node.as_array();
        if (list == nullptr) return at.Error(form);
        out->clear();
        for (const toml::node& item : *list) {
          const std::optional<std::string> v = item.value_exact<std::string>();
          if (!v) return at.Error(form);
          if (check) {
            if (Status s = check(*v); !s.ok()) return at.Error(s.message());
          }
          out->push_back(*v);
        }
        return Status::Ok();
      };
}

Handlers RetentionHandlers(JobConfig* j, std::string* keep_within) {
  pipeline::RetentionPolicy& p = j->retention;
  return {
      {"keep_last", KeepCount(&p.keep_last)},
      {"keep_hourly", KeepCount(&p.keep_hourly)},
      {"keep_daily", KeepCount(&p.keep_daily)},
      {"keep_weekly", KeepCount(&p.keep_weekly)},
      {"keep_monthly", KeepCount(&p.keep_monthly)},
      {"keep_yearly", KeepCount(&p.keep_yearly)},
      {"keep_within",
       String(keep_within,
              [](const std::string& v) { return pipeline::ParseRetentionDuration(v).status(); })},
      {"keep_tags", StringList(&p.keep_tags, "[\"monthly\"]")},
      {"prune_interval", String(&j->prune_interval,
                                [](const std::string& v) {
                                  if (v == "always" || v == "never") return Status::Ok();
                                  return pipeline::ParseRetentionDuration(v).status();
                                })},
      {"max_unused",
       String(&j->max_unused,
              [](const std::string& v) { return pipeline::ParseUnusedLimit(v).status(); })},
      {"verify_share", VerifyShare(&j->verify_share)},
  };
}

Handlers JobHandlers(JobConfig* j, std::string* keep_within) {
  Handlers h = {
      {"repository", String(&j->repository)},
      {"source", String(&j->source, Source)},
      {"tag", String(&j->tag, pipeline::CheckTag)},
      {"schedule", String(&j->schedule, Schedule)},
      {"randomized_delay", String(&j->randomized_delay, Duration)},
      {"lock_wait", String(&j->lock_wait, Duration)},
      {"chap_user", String(&j->chap_user)},
      {"chap_secret_file", SecretFile(&j->chap_secret_file)},
      {"target_chap_user", String(&j->target_chap_user)},
      {"target_chap_secret_file", SecretFile(&j->target_chap_secret_file)},
      {"initiator_name", String(&j->initiator_name)},
      {"header_digest", String(&j->header_digest,
                               [](const std::string& v) {
                                 return v == "auto" || v == "none" || v == "crc32c"
                                            ? Status::Ok()
                                            : Status::InvalidArgument(
                                                  "must be \"auto\", \"none\" or \"crc32c\"");
                               })},
      {"login_timeout", String(&j->login_timeout, Duration)},
      {"command_timeout", String(&j->command_timeout, Duration)},
      // The same ranges as --connections and --queue-depth.
      {"connections", Integer(&j->connections, 1, initiator::kMaxLongRttConnections)},
      {"queue_depth", Integer(&j->queue_depth, 1, initiator::kMaxQueueDepth)},
      {"io_size", String(&j->io_size, Size)},
      {"max_memory", String(&j->max_memory, Size)},
      {"retry_timeout", String(&j->retry_timeout, Duration)},
      {"limit_rate", String(&j->limit_rate, LimitRate)},
      {"congestion_control", String(&j->congestion_control, CongestionControlName)},
      {"replicate_to", StringList(&j->replicate_to, "[\"iscsi://dr-san/iqn…:standby/1\"]", Source)},
      {"replica_chap_user", String(&j->replica_chap_user)},
      {"replica_chap_secret_file", SecretFile(&j->replica_chap_secret_file)},
  };
  for (auto& entry : RetentionHandlers(j, keep_within))
    h.push_back(std::move(entry));
  return h;
}

// Rules that involve more than one key of a job.
Status CheckJob(const Config& config, const JobConfig& job, const toml::table& table,
                const std::string& file) {
  auto at = [&](const char* key) {
    const toml::node* node = table.get(key);
    return Place(file, node != nullptr ? *node : static_cast<const toml::node&>(table),
                 "jobs." + job.name + (node != nullptr ? std::string(".") + key : ""));
  };
  if (job.repository.empty()) return at("repository").Error("missing key 'repository'");
  if (config.repositories.count(job.repository) == 0) {
    return at("repository").Error("no [repositories." + job.repository + "] in this file");
  }
  if (job.source.empty()) return at("source").Error("missing key 'source'");
  if (!job.chap_secret_file.empty() && job.chap_user.empty() &&
      job.source.find('@') == std::string::npos) {
    return at("chap_secret_file").Error("needs chap_user (or user@ in the source URL)");
  }
  if (!job.target_chap_secret_file.empty() && job.target_chap_user.empty()) {
    return at("target_chap_secret_file").Error("needs target_chap_user");
  }
  if (!job.replica_chap_secret_file.empty() && job.replica_chap_user.empty()) {
    return at("replica_chap_secret_file").Error("needs replica_chap_user");
  }
  // The write guard's rules that the file alone decides (every repository, every job's
  // source): said now, not every night.
  for (const std::string& to : job.replicate_to) {
    guard::Destination dest;
    dest.name = "'" + to + "'";
    dest.identity = guard::Identify(to);
    std::vector<guard::Protected> protect;
    AddProtected(config, dest.identity, &protect);
    guard::ResolveHosts(&dest, &protect);
    if (Status s = guard::CheckWriteTarget(dest, protect); !s.ok()) {
      return at("replicate_to").Error(s.message());
    }
  }
  return Status::Ok();
}

Status ReadRepositories(const std::string& file, const toml::node& node, Config* config) {
  const toml::table* repos = node.as_table();
  if (repos == nullptr) return Place(file, node, "repositories").Error("must be a table");
  for (const auto& [key, value] : *repos) {
    const std::string name(key.str());
    const Place at(file, value, "repositories." + name);
    if (Status s = RepositoryName(name); !s.ok()) return at.Error(s.message());
    const toml::table* table = value.as_table();
    if (table == nullptr) return at.Error("must be a table: [repositories." + name + "]");
    RepositoryConfig repo;
    repo.name = name;
    WB_RETURN_IF_ERROR(
        ReadTable(file, "repositories." + name + ".", *table, RepositoryHandlers(&repo)));
    if (repo.path.empty()) return at.Error("missing key 'path'");
    WB_RETURN_IF_ERROR(CheckS3Keys(file, *table, repo));
    if (!repo.password_file.empty() && !repo.key_file.empty()) {
      return at.Error("give password_file or key_file, not both");
    }
    if (repo.insecure_no_encryption && (!repo.password_file.empty() || !repo.key_file.empty())) {
      return at.Error(
          "insecure_no_encryption is for an unencrypted repository, which takes no "
          "password_file or key_file");
    }
    config->repositories[name] = repo;
  }
  return Status::Ok();
}

Status ReadJobs(const std::string& file, const toml::node& node, Config* config) {
  const toml::table* jobs = node.as_table();
  if (jobs == nullptr) return Place(file, node, "jobs").Error("must be a table");
  for (const auto& [key, value] : *jobs) {
    const std::string name(key.str());
    const Place at(file, value, "jobs." + name);
    if (Status s = JobName(name); !s.ok()) return at.Error(s.message());
    const toml::table* table = value.as_table();
    if (table == nullptr) return at.Error("must be a table: [jobs." + name + "]");
    JobConfig job;
    job.name = name;
    std::string keep_within;
    WB_RETURN_IF_ERROR(
        ReadTable(file, "jobs." + name + ".", *table, JobHandlers(&job, &keep_within)));
    if (Status tags = pipeline::CheckKeepTags(job.retention.keep_tags); !tags.ok()) {
      return Place(file, value, "jobs." + name + ".keep_tags").Error(tags.message());
    }
    if (!keep_within.empty()) {
      WB_ASSIGN_OR_RETURN(job.retention.keep_within, pipeline::ParseRetentionDuration(keep_within));
    }
    if (!job.schedule.empty()) {
      const CalendarSpec spec = *ParseCalendar(job.schedule);  // checked by its handler
      if (!NextElapse(spec, std::chrono::system_clock::now())) {
        const Place schedule(file, *table->get("schedule"), "jobs." + name + ".schedule");
        job.warnings.push_back(schedule
                                   .Error("'" + job.schedule +
                                          "' never elapses from now on: the job runs only "
                                          "when started by hand")
                                   .message());
      }
    }
    config->jobs[name] = job;
  }
  // Then the rules across keys, with every job known (a replica may be another job's source).
  for (const auto& [key, value] : *jobs) {
    WB_RETURN_IF_ERROR(
        CheckJob(*config, config->jobs.at(std::string(key.str())), *value.as_table(), file));
  }
  return Status::Ok();
}

// [metrics] textfile is replaced whole by every run, as root: the write guard's rules, and none
// of the other files the config names (itself, a credential file, a replica). Said at load, so
// that `run --dry-run` and `jobs` say it too.
void AddNamedFile(const std::string& path, const std::string& what,
                  std::vector<guard::Protected>* protect) {
  if (path.empty()) return;
  guard::Protected p;
  p.rule = guard::Rule::kNamedFile;
  p.identity = guard::Identify(path);
  p.what = what;
  protect->push_back(p);
}

Status CheckMetricsTarget(const Config& config, const toml::table& root) {
  if (config.metrics_textfile.empty()) return Status::Ok();
  const toml::node* node = root.at_path("metrics.textfile").node();
  const Place at(config.path, node != nullptr ? *node : static_cast<const toml::node&>(root),
                 "metrics.textfile");
  guard::Destination dest;
  // As repositories.path and replicate_to: a relative name would land wherever cron or systemd
  // starts the run (/ or root's home).
  if (config.metrics_textfile[0] != '/') {
    return at.Error("'" + config.metrics_textfile + "' must be an absolute path");
  }
  dest.name = "'" + config.metrics_textfile + "'";
  dest.identity = guard::Identify(config.metrics_textfile);
  // What the name holds now is a slip of the config's only when it is root's or ours: another
  // user's directory or FIFO planted there (a shared sticky textfile directory) must not stop
  // every run at load; the run replaces what it can and says what it cannot (round 8, Y4).
  struct stat there {};
  const bool ours = ::lstat(config.metrics_textfile.c_str(), &there) == 0 &&
                    (there.st_uid == 0 || there.st_uid == ::geteuid());
  if (struct stat st{};
      ours && ::stat(config.metrics_textfile.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return at.Error("'" + config.metrics_textfile +
                    "' is a directory; give the file the run writes (e.g. DIR/wanbackup.prom)");
  }
  std::vector<guard::Protected> protect;
  AddProtected(config, dest.identity, &protect);
  for (const auto& [name, job] : config.jobs) {
    for (const std::string& to : job.replicate_to)
      AddNamedFile(to, "a replica of job " + name + " (replicate_to)", &protect);
  }
  if (Status s = guard::CheckWriteTarget(dest, protect); !s.ok()) return at.Error(s.message());
  // node_exporter's textfile collector reads *.prom only; anything else named here is a slip
  // the run would replace whole (/dev/null, /etc/passwd).
  if (!config.metrics_textfile.ends_with(".prom")) {
    return at.Error("'" + config.metrics_textfile +
                    "' does not end in .prom: the run replaces it whole, and node_exporter's "
                    "textfile collector reads only *.prom files");
  }
  if (ours && !S_ISREG(there.st_mode) && !S_ISLNK(there.st_mode)) {
    return at.Error("'" + config.metrics_textfile + "' is " + FileKind(there.st_mode) +
                    ", not a file the run may replace");
  }
  return Status::Ok();
}

}  // namespace

std::string ConfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv(kConfigEnv); env != nullptr && *env) return env;
  return kDefaultConfigPath;
}

Result<Config> LoadConfig(const std::string& path) {
  WB_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(path + ":" + std::to_string(e.source().begin.line) + ": " +
                                   std::string(e.description()));
  }
  Config config;
  config.path = path;
  // Repositories first: jobs name them.
  if (const toml::node* repos = root.get("repositories")) {
    WB_RETURN_IF_ERROR(ReadRepositories(path, *repos, &config));
  }
  Handlers top = {
      {"repositories", [](const Place&, const toml::node&) { return Status::Ok(); }},
      {"jobs", [&](const Place&, const toml::node& n) { return ReadJobs(path, n, &config); }},
      {"metrics",
       [&](const Place& at, const toml::node& n) -> Status {
         const toml::table* t = n.as_table();
         if (t == nullptr) return at.Error("must be a table: [metrics]");
         return ReadTable(path, "metrics.", *t, {{"textfile", String(&config.metrics_textfile)}});
       }},
  };
  WB_RETURN_IF_ERROR(ReadTable(path, "", root, top));
  WB_RETURN_IF_ERROR(CheckMetricsTarget(config, root));
  return config;
}

void AddTrustAnchorDirectory(std::vector<guard::Protected>* protect) {
  guard::Protected anchors;
  anchors.rule = guard::Rule::kRepository;
  anchors.identity = guard::Identify(pipeline::DefaultSecurityDir());
  anchors.what = "the trust anchor directory " + pipeline::DefaultSecurityDir();
  anchors.tree = true;
  protect->push_back(anchors);
}

void AddProtected(const Config& config, const guard::Identity& to,
                  std::vector<guard::Protected>* protect) {
  AddTrustAnchorDirectory(protect);
  for (const auto& [name, repository] : config.repositories) {
    // An S3 repository's files here are its cache (a catalog and the job history).
    if (pipeline::IsS3Url(repository.path)) {
      const std::string cache = !repository.cache_dir.empty() ? repository.cache_dir
                                : !repository.repository_id.empty()
                                    ? pipeline::DefaultCacheDir(repository.repository_id)
                                    : "";  // known only from the store's config.json
      if (!cache.empty()) guard::AddRepository(cache, to, protect);
      continue;
    }
    guard::AddRepository(repository.path, to, protect);
  }
  guard::AddRepositoriesHolding(to, protect);  // and one the file does not name
  for (const auto& [name, job] : config.jobs) {
    guard::Protected source;
    source.rule = guard::Rule::kJobSource;
    source.identity = guard::Identify(job.source);
    source.what = "the source of job " + name;
    source.hint = "a replica is a standby copy";
    protect->push_back(source);
  }
  // The files the config itself needs: losing one stops every job.
  AddNamedFile(config.path, "this config file", protect);
  for (const auto& [name, repo] : config.repositories) {
    AddNamedFile(repo.password_file, "the password_file of repository " + name, protect);
    AddNamedFile(repo.key_file, "the key_file of repository " + name, protect);
    AddNamedFile(repo.s3_credentials_file, "the s3_credentials_file of repository " + name,
                 protect);
  }
  for (const auto& [name, job] : config.jobs) {
    AddNamedFile(job.chap_secret_file, "the chap_secret_file of job " + name, protect);
    AddNamedFile(job.target_chap_secret_file, "the target_chap_secret_file of job " + name,
                 protect);
    AddNamedFile(job.replica_chap_secret_file, "the replica_chap_secret_file of job " + name,
                 protect);
  }
}

Result<const JobConfig*> FindJob(const Config& config, const std::string& name) {
  const auto it = config.jobs.find(name);
  if (it != config.jobs.end()) return &it->second;
  std::string names;
  for (const auto& [job, unused] : config.jobs)
    names += (names.empty() ? "" : ", ") + job;
  return Status::NotFound(
      "no job '" + name + "' in " + config.path +
      (names.empty() ? " (it has no [jobs.NAME] section)" : " (jobs: " + names + ")"));
}

}  // namespace wanbackup::jobs
