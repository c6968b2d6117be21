// The job configuration file (jobs/config.h): a good file loads with its values; every kind of
// bad file is refused with one line naming file:line and key, exit status 2's kind.
#include <sys/stat.h>

#include <fstream>

#include <catch2/catch.hpp>

#include "jobs/config.h"
#include "support/temp_dir.h"

namespace wanbackup::jobs {
namespace {

using testing::TempDir;

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

// A directory with a passphrase file and a CHAP secret file (0600) and a config naming them.
struct ConfigDir {
  TempDir dir{"config"};
  std::string pass = dir / "main.pass";
  std::string chap = dir / "db.chap";
  std::string config = dir / "wanbackup.toml";
  ConfigDir() {
    WriteFile(pass, "secret\n");
    WriteFile(chap, "chapsecret\n");
  }
  std::string Repos() const {
    return "[repositories.main]\npath = \"/srv/backup/main\"\npassword_file = \"" + pass + "\"\n\n";
  }
  std::string Job() const {
    return "[jobs.db]\nrepository = \"main\"\n"
           "source = \"iscsi://san.example.net/iqn.2001-05.com.example:db/1\"\n"
           "chap_user = \"backup\"\nchap_secret_file = \"" +
           chap + "\"\n";
  }
  Result<Config> Load(const std::string& text, mode_t mode = 0600) const {
    WriteFile(config, text, mode);
    return LoadConfig(config);
  }
  // REQUIREs a refusal and returns its message.
  std::string Refused(const std::string& text, mode_t mode = 0600) const {
    Result<Config> c = Load(text, mode);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kInvalidArgument);
    return c.status().message();
  }
};

TEST_CASE("job config: the example's keys load with their values", "[config]") {
  ConfigDir d;
  Result<Config> c =
      d.Load(d.Repos() + d.Job() +
             "tag = \"nightly\"\nschedule = \"*-*-* 01:30:00\"\nkeep_last = 7\nkeep_daily = 14\n"
             "keep_weekly = 8\nkeep_monthly = 12\nkeep_within = \"3d\"\n"
             "keep_tags = [\"keep\"]\nlimit_rate = \"80M\"\nconnections = 8\n"
             "congestion_control = \"bbr\"\n"
             "verify_share = 0.1\nprune_interval = \"always\"\n\n"
             "[metrics]\ntextfile = \"/tmp/x.prom\"\n");
  REQUIRE(c.ok());
  const JobConfig& j = c->jobs.at("db");
  CHECK(j.repository == "main");
  CHECK(j.tag == "nightly");
  CHECK(j.schedule == "*-*-* 01:30:00");
  CHECK(j.retention.keep_last == 7);
  CHECK(j.retention.keep_daily == 14);
  CHECK(j.retention.keep_weekly == 8);
  CHECK(j.retention.keep_monthly == 12);
  CHECK(j.retention.keep_within == std::chrono::hours(72));
  CHECK(j.retention.keep_tags == std::vector<std::string>{"keep"});
  CHECK(j.limit_rate == "80M");
  CHECK(j.connections == 8);
  CHECK(j.congestion_control == "bbr");
  CHECK(j.verify_share == Approx(0.1));
  CHECK(j.prune_interval == "always");
  CHECK(j.chap_secret_file == d.chap);
  CHECK(c->repositories.at("main").password_file == d.pass);
  CHECK(c->metrics_textfile == "/tmp/x.prom");
  CHECK(FindJob(*c, "db").ok());
  Result<const JobConfig*> missing = FindJob(*c, "web");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("(jobs: db)") != std::string::npos);
}

TEST_CASE("job config: an unknown key names file, line and key, and the near miss", "[config]") {
  ConfigDir d;
  const std::string msg = d.Refused(d.Repos() + d.Job() + "kep_last = 3\n");
  CHECK(msg == d.config + ":10: jobs.db.kep_last: unknown key (did you mean 'keep_last'?)");
  CHECK(d.Refused(d.Repos() + "[frobs]\n").find(":5: frobs: unknown key") != std::string::npos);
}

TEST_CASE("job config: a value of the wrong type or out of range is refused", "[config]") {
  ConfigDir d;
  CHECK(d.Refused(d.Repos() + d.Job() + "keep_last = \"7\"\n") ==
        d.config + ":10: jobs.db.keep_last: must be a whole number");
  CHECK(d.Refused(d.Repos() + d.Job() + "connections = 99\n") ==
        d.config + ":10: jobs.db.connections: must lie from 1 to 32");
  CHECK(d.Refused(d.Repos() + d.Job() + "connections = 33\n") ==
        d.config + ":10: jobs.db.connections: must lie from 1 to 32");
  const Result<Config> most = d.Load(d.Repos() + d.Job() + "connections = 32\n");
  REQUIRE(most.ok());
  CHECK(most->jobs.at("db").connections == 32);
  CHECK(
      d.Refused(d.Repos() + d.Job() + "limit_rate = \"20Mb\"\n").find(":10: jobs.db.limit_rate") !=
      std::string::npos);
  CHECK(d.Refused(d.Repos() + d.Job() + "schedule = \"*-*-* 25:00\"\n")
            .find(":10: jobs.db.schedule: schedule '*-*-* 25:00': hour") != std::string::npos);
  CHECK(d.Refused(d.Repos() + d.Job() + "verify_share = 2\n").find("verify_share") !=
        std::string::npos);
  CHECK(d.Refused(d.Repos() + d.Job() + "congestion_control = \"bbr --x\"\n") ==
        d.config +
            ":10: jobs.db.congestion_control: must name a TCP congestion control, such "
            "as \"cubic\" or \"bbr\"");
  CHECK(d.Refused("x = [1,\n").find(d.config + ":") == 0);  // TOML syntax error, with a line
  // An empty tag to keep would keep every untagged snapshot for good (round 9, Z2).
  CHECK(d.Refused(d.Repos() + d.Job() + "keep_last = 3\nkeep_tags = [\"\"]\n")
            .find("an empty tag to keep would keep every snapshot without a tag") !=
        std::string::npos);
}

TEST_CASE("job config: a job naming an unknown repository is refused", "[config]") {
  ConfigDir d;
  std::string job = d.Job();
  job.replace(job.find("\"main\""), 6, "\"backup\"");
  CHECK(d.Refused(d.Repos() + job) ==
        d.config + ":6: jobs.db.repository: no [repositories.backup] in this file");
}

TEST_CASE("job config: credential files must exist and be readable by their owner only",
          "[config]") {
  ConfigDir d;
  const std::string missing = d.Refused(
      "[repositories.main]\npath = \"/srv/b\"\npassword_file = \"" + d.dir / "nope" + "\"\n");
  CHECK(missing.find(d.config + ":3: repositories.main.password_file: " + d.dir / "nope") == 0);
  REQUIRE(::chmod(d.chap.c_str(), 0644) == 0);
  const std::string loose = d.Refused(d.Repos() + d.Job());
  CHECK(loose.find(":9: jobs.db.chap_secret_file: " + d.chap +
                   ": readable by others (mode 0644); it holds a secret: chmod 600 " + d.chap) !=
        std::string::npos);
}

TEST_CASE("job config: no secret inline, and a config file others can read is refused",
          "[config]") {
  ConfigDir d;
  CHECK(d.Refused(d.Repos() + "[jobs.db]\nrepository = \"main\"\n"
                              "source = \"iscsi://u%pw@san/iqn.x:y/1\"\n")
            .find("no secrets in the config file") != std::string::npos);
  CHECK(d.Refused(d.Repos(), 0644) == d.config + ": readable by others (mode 0644); it says what " +
                                          "runs as whom with which secrets: chmod 600 " + d.config);
  CHECK(d.Load(d.Repos(), 0640).ok());
}

TEST_CASE("job config: a missing config file says how to give one", "[config]") {
  Result<Config> c = LoadConfig("/nonexistent/wanbackup.toml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kNotFound);
  CHECK(c.status().message().find("--config") != std::string::npos);
}

TEST_CASE("job config: replicate_to names replicas, never the source, with their own login",
          "[config]") {
  ConfigDir d;
  Result<Config> c = d.Load(d.Repos() + d.Job() +
                            "replicate_to = [\"iscsi://dr/iqn.2001-05.com.example:standby/1\", "
                            "\"/dev/vg0/standby\"]\nreplica_chap_user = \"dr\"\n"
                            "replica_chap_secret_file = \"" +
                            d.chap + "\"\n");
  REQUIRE(c.ok());
  CHECK(c->jobs.at("db").replicate_to.size() == 2);
  CHECK(c->jobs.at("db").replica_chap_user == "dr");
  CHECK(d.Refused(d.Repos() + d.Job() + "replicate_to = \"/dev/sdb\"\n") ==
        d.config +
            ":10: jobs.db.replicate_to: must be a list of strings: "
            "[\"iscsi://dr-san/iqn…:standby/1\"]");
  CHECK(d.Refused(d.Repos() + d.Job() + "replicate_to = [\"standby.img\"]\n")
            .find("jobs.db.replicate_to: expected iscsi://") != std::string::npos);
  CHECK(d.Refused(d.Repos() + d.Job() +
                  "replicate_to = [\"iscsi://san.example.net/iqn.2001-05.com.example:db/1\"]\n")
            .find("is the source of job db") != std::string::npos);
  CHECK(d.Refused(d.Repos() + d.Job() + "replica_chap_secret_file = \"" + d.chap + "\"\n")
            .find("needs replica_chap_user") != std::string::npos);
  // The same LUN through another portal spelling is still the source.
  CHECK(d.Refused(d.Repos() + d.Job() +
                  "replicate_to = [\"iscsi://10.0.0.5:3260/iqn.2001-05.com.example:db/1\"]\n")
            .find("is the source of job db") != std::string::npos);
  // Another job's source in the same repository: replicate would refuse it every night.
  const std::string other = "\n[jobs.web]\nrepository = \"main\"\nsource = \"/dev/vg0/web\"\n";
  CHECK(d.Refused(d.Repos() + d.Job() + "replicate_to = [\"/dev/vg0/web\"]\n" + other)
            .find(":10: jobs.db.replicate_to: '/dev/vg0/web' is the source of job web") !=
        std::string::npos);
}

TEST_CASE("job config: an iSCSI URL the run would refuse is refused when the file is read",
          "[config]") {
  ConfigDir d;
  const std::string head = d.Repos() + "[jobs.db]\nrepository = \"main\"\n";
  for (const std::string& url : {std::string("iscsi://san/iqn.2001-05.com.example:db"),
                                 std::string("iscsi://san/iqn.2001-05.com.example:db/1/x"),
                                 std::string("iscsi://san:99999/iqn.2001-05.com.example:db/1"),
                                 std::string("iscsi://san")}) {
    INFO(url);
    std::string as_source = head;
    as_source.append("source = \"").append(url).append("\"\n");
    CHECK(d.Refused(as_source).find(d.config + ":7: jobs.db.source: ") == 0);
    std::string as_replica = head;
    as_replica.append("source = \"/dev/sda\"\nreplicate_to = [\"").append(url).append("\"]\n");
    CHECK(d.Refused(as_replica).find(d.config + ":8: jobs.db.replicate_to: ") == 0);
  }
}

}  // namespace
}  // namespace wanbackup::jobs

namespace wanbackup::jobs {
namespace {

TEST_CASE("job config: a job name outside [A-Za-z0-9_][A-Za-z0-9_-]* is refused, saying why",
          "[config]") {
  ConfigDir d;
  const std::string body = "repository = \"main\"\nsource = \"/dev/sda\"\n";
  const std::string dotted = d.Refused(d.Repos() + "[jobs.\"db.prod\"]\n" + body);
  CHECK(dotted.find(d.config + ":5: jobs.db.prod: ") == 0);
  CHECK(dotted.find("cron") != std::string::npos);  // Debian's cron ignores /etc/cron.d/a.b
  CHECK(d.Refused(d.Repos() + "[jobs.\"-n\"]\n" + body).find("jobs.-n: ") != std::string::npos);
  CHECK(d.Refused(d.Repos() + "[jobs.\"a b\"]\n" + body).find("jobs.a b: ") != std::string::npos);
  CHECK(d.Refused(d.Repos() + "[jobs.\"\"]\n" + body).find("jobs.: ") != std::string::npos);
  CHECK(d.Load(d.Repos() + "[jobs._db-2]\n" + body).ok());
}

TEST_CASE("job config: a tag the mount view cannot show as a name is refused at its line",
          "[config]") {
  ConfigDir d;
  for (const std::string tag : {".", "..", "latest", "1", "99", "a/b"}) {
    INFO(tag);
    const std::string why = d.Refused(d.Repos() + d.Job() + "tag = \"" + tag + "\"\n");
    CHECK(why.find("tag") != std::string::npos);
    CHECK(why.find("all digits") != std::string::npos);
  }
  for (const std::string tag : {"nightly", "latest-good", "v1", "1a", "..x"})
    CHECK(d.Load(d.Repos() + d.Job() + "tag = \"" + tag + "\"\n").ok());
}

TEST_CASE("job config: verify_share that is not a number from 0 to 1 is refused at its line",
          "[config]") {
  ConfigDir d;
  for (const std::string v :
       {"nan", "inf", "-inf", "-0.1", "1.5", "1e-19", "\"1e-19%\"", "\"-5%\"", "0.00001"}) {
    INFO(v);
    CHECK(d.Refused(d.Repos() + d.Job() + "verify_share = " + v + "\n")
              .find(d.config + ":10: jobs.db.verify_share: ") == 0);
  }
  for (const std::string v : {"0", "1", "0.0001", "\"0.01%\"", "\"10%\"", "0.5"}) {
    INFO(v);
    CHECK(d.Load(d.Repos() + d.Job() + "verify_share = " + v + "\n").ok());
  }
}

TEST_CASE("job config: a schedule that can no longer elapse is a warning for that job only",
          "[config]") {
  ConfigDir d;
  Result<Config> c = d.Load(d.Repos() + d.Job() + "schedule = \"2001-01-01 00:00\"\n\n" +
                            "[jobs.web]\nrepository = \"main\"\nsource = \"/dev/sdb\"\n" +
                            "schedule = \"daily\"\n");
  REQUIRE(c.ok());
  REQUIRE(c->jobs.at("db").warnings.size() == 1);
  CHECK(c->jobs.at("db").warnings[0].find(d.config +
                                          ":10: jobs.db.schedule: '2001-01-01 00:00' never "
                                          "elapses from now on") == 0);
  CHECK(c->jobs.at("web").warnings.empty());
  // A schedule that does not parse is still an error.
  CHECK(d.Refused(d.Repos() + d.Job() + "schedule = \"2001-13-01\"\n").find("jobs.db.schedule") !=
        std::string::npos);
}

TEST_CASE("job config: repository_id pins the repository, 32 lowercase hex digits", "[config]") {
  ConfigDir d;
  const std::string id = "0123456789abcdef0123456789abcdef";
  Result<Config> c = d.Load("[repositories.main]\npath = \"/srv/backup/main\"\npassword_file = \"" +
                            d.pass + "\"\nrepository_id = \"" + id + "\"\n\n" + d.Job());
  REQUIRE(c.ok());
  CHECK(c->repositories.at("main").repository_id == id);
  CHECK_FALSE(c->repositories.at("main").insecure_no_encryption);
  // Without the key: any id.
  Result<Config> any = d.Load(d.Repos() + d.Job());
  REQUIRE(any.ok());
  CHECK(any->repositories.at("main").repository_id.empty());
  for (const std::string bad : {"0123456789ABCDEF0123456789ABCDEF", "0123", "not an id",
                                "0123456789abcdef0123456789abcdef0"}) {
    INFO(bad);
    CHECK(d.Refused(d.Repos() + "repository_id = \"" + bad + "\"\n\n" + d.Job())
              .find(":5: repositories.main.repository_id: must be a repository id") !=
          std::string::npos);
  }
  CHECK(d.Refused(d.Repos() + "repository_id = 12\n\n" + d.Job())
            .find(":5: repositories.main.repository_id: must be a string") != std::string::npos);
}

TEST_CASE("job config: insecure_no_encryption is a boolean, for a repository without credentials",
          "[config]") {
  ConfigDir d;
  const std::string plain = "[repositories.main]\npath = \"/srv/backup/main\"\n";
  Result<Config> c = d.Load(plain + "insecure_no_encryption = true\n\n" + d.Job());
  REQUIRE(c.ok());
  CHECK(c->repositories.at("main").insecure_no_encryption);
  CHECK(d.Refused(plain + "insecure_no_encryption = \"yes\"\n\n" + d.Job()) ==
        d.config +
            ":3: repositories.main.insecure_no_encryption: must be true or false (without "
            "quotes)");
  CHECK(d.Refused(d.Repos() + "insecure_no_encryption = true\n\n" + d.Job())
            .find("takes no password_file or key_file") != std::string::npos);
}

TEST_CASE("job config: the metrics textfile is an absolute path to a file, not a directory",
          "[config]") {
  ConfigDir d;
  CHECK_THAT(d.Refused(d.Repos() + d.Job() + "\n[metrics]\ntextfile = \"metrics.prom\"\n"),
             Catch::Contains("metrics.textfile: 'metrics.prom' must be an absolute path"));
  CHECK_THAT(d.Refused(d.Repos() + d.Job() + "\n[metrics]\ntextfile = \"" + d.dir.path() + "\"\n"),
             Catch::Contains("is a directory; give the file the run writes"));
  CHECK(d.Load(d.Repos() + d.Job() + "\n[metrics]\ntextfile = \"" + (d.dir / "w.prom") + "\"\n")
            .ok());
  // Not a textfile node_exporter reads: a slip the run would replace whole.
  for (const char* slip : {"/dev/null", "/etc/passwd", "/var/lib/node/wanbackup.txt"}) {
    CHECK_THAT(
        d.Refused(d.Repos() + d.Job() + "\n[metrics]\ntextfile = \"" + slip + "\"\n"),
        Catch::Contains(std::string("metrics.textfile: '") + slip + "' does not end in .prom"));
  }
  const std::string fifo = d.dir / "fifo.prom";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(d.Refused(d.Repos() + d.Job() + "\n[metrics]\ntextfile = \"" + fifo + "\"\n"),
             Catch::Contains("'" + fifo + "' is a FIFO, not a file the run may replace"));
}

TEST_CASE("job config: an S3 repository takes s3_credentials_file and cache_dir, a directory not",
          "[config]") {
  ConfigDir d;
  const std::string cred = d.dir / "s3.cred";
  WriteFile(cred, "[default]\naws_access_key_id = AKID\naws_secret_access_key = s\n");
  const std::string s3 =
      "[repositories.main]\npath = \"s3:http://rgw.example:7480/backups/db\"\n"
      "password_file = \"" +
      d.pass + "\"\ns3_credentials_file = \"" + cred +
      "\"\ncache_dir = \"/var/cache/wanbackup/db\"\n\n";
  Result<Config> c = d.Load(s3 + d.Job());
  REQUIRE(c.ok());
  CHECK(c->repositories["main"].path == "s3:http://rgw.example:7480/backups/db");
  CHECK(c->repositories["main"].s3_credentials_file == cred);
  CHECK(c->repositories["main"].cache_dir == "/var/cache/wanbackup/db");
  // Its cache directory is no place for a replica: the write guard's repository rule.
  const std::string cache = d.dir / "cache";
  REQUIRE(::mkdir(cache.c_str(), 0700) == 0);
  std::string in_cache = s3;
  in_cache.replace(in_cache.find("/var/cache/wanbackup/db"), 23, cache);
  const std::string replica = "replicate_to = [\"" + cache + "/disk.img\"]\n";
  CHECK_THAT(d.Refused(in_cache + d.Job() + replica), Catch::Contains(cache));

  CHECK_THAT(d.Refused(d.Repos() + "cache_dir = \"/var/cache/x\"\n" + d.Job()),
             Catch::Contains("repositories.main.cache_dir: is for a repository on S3"));
  CHECK_THAT(d.Refused(d.Repos() + "s3_credentials_file = \"" + cred + "\"\n" + d.Job()),
             Catch::Contains("s3_credentials_file: is for a repository on S3"));
  CHECK_THAT(d.Refused(d.Repos() + "upload_memory = \"1G\"\n" + d.Job()),
             Catch::Contains("repositories.main.upload_memory: is for a repository on S3"));
  Result<Config> sized = d.Load(s3 + "upload_memory = \"1G\"\n\n" + d.Job());
  REQUIRE(sized.ok());
  CHECK(sized->repositories["main"].upload_memory == "1G");
  CHECK_THAT(d.Refused(s3 + "upload_memory = \"0\"\n\n" + d.Job()),
             Catch::Contains("upload_memory: must be more than 0"));
  // The credentials file is a secret file: others may not read it.
  REQUIRE(::chmod(cred.c_str(), 0644) == 0);
  CHECK_THAT(d.Refused(s3 + d.Job()), Catch::Contains("s3_credentials_file"));
  // A bad URL, keys in the URL (not repeated), a relative cache_dir.
  const std::string bad_url = "[repositories.main]\npath = \"s3:ftp://h/b\"\n" + d.Job();
  CHECK_THAT(d.Refused(bad_url), Catch::Contains("repositories.main.path: bad S3 URL"));
  const std::string keys = "[repositories.main]\npath = \"s3:http://AKID:hunter2@h/bucket\"\n";
  const std::string refused = d.Refused(keys + d.Job());
  CHECK_THAT(refused, Catch::Contains("credentials do not belong in the URL"));
  CHECK(refused.find("hunter2") == std::string::npos);
  const std::string relative =
      "[repositories.main]\npath = \"s3:http://h/bucket\"\ncache_dir = \"cache\"\n" + d.Job();
  CHECK_THAT(d.Refused(relative), Catch::Contains("must be an absolute path"));
}

}  // namespace
}  // namespace wanbackup::jobs
