// Running the real wanbackup binary against a repository in a test's temporary directory, and
// the images those tests snapshot. RepoCli is not thread-safe; one per test.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {

inline constexpr uint64_t kTestChunk = 4u << 20;
inline constexpr char kTestPassphrase[] = "test-pass";

// Options that unlock a repository with `passphrase` ($WANBACKUP_PASSWORD); 120 s timeout.
RunOptions WithPass(const std::string& passphrase = kTestPassphrase);
// Runs the wanbackup binary with `args` in this process's network namespace, for local sources
// and repositories (Testbed::Wanbackup runs it in site A, across the WAN).
RunResult Local(std::vector<std::string> args, const RunOptions& options = WithPass());
// What a command printed with --json; REQUIREs exit 0 (printing exit code and output when not).
nlohmann::json Json(const RunResult& r);

// A test's temporary directory (TempDir `name`) and the path of a repository in it, not created.
struct ScratchRepo {
  explicit ScratchRepo(const std::string& name) : tmp(name) {}
  TempDir tmp;
  std::string dir = tmp.path(), repo = tmp / "repo";
};

class RepoCli {
 public:
  // A repository at dir/repo, unlocked with the key file dir/repo.key (no Argon2 per command)
  // or, when a passphrase is given to Wb/Ok, with it. `env` {WANBACKUP_KEY_FILE: ""} gives no
  // credentials at all (an unencrypted repository refuses any).
  explicit RepoCli(const TempDir& dir) : dir_(dir), path_(dir / "repo"), key_(dir / "repo.key") {}

  RunResult Wb(std::vector<std::string> args, const std::string& passphrase = "",
               const std::map<std::string, std::string>& env = {}) const;
  // As Wb with the key file, run in the directory `cwd`.
  RunResult WbIn(const std::string& cwd, std::vector<std::string> args) const;
  // As Wb, and REQUIREs exit 0 (printing the output when not).
  RunResult Ok(std::vector<std::string> args, const std::string& passphrase = "",
               const std::map<std::string, std::string>& env = {}) const;

  const TempDir& dir() const { return dir_; }
  const std::string& path() const { return path_; }
  const std::string& key() const { return key_; }
  std::string catalog() const { return path_ + "/catalog.db"; }

 private:
  const TempDir& dir_;
  std::string path_, key_;
};

// `chunks` chunks of kTestChunk bytes of noise from `seed`; chunk 1 is all zeros.
void WriteNoiseImage(const std::string& path, uint64_t seed, size_t chunks);
// Overwrites `text` at `offset` of the file.
void Scribble(const std::string& path, uint64_t offset, const std::string& text);
// True when the two files hold the same bytes.
bool SameFile(const std::string& a, const std::string& b);
// True when `copy` equals the first `length` bytes of `original` (a LUN read back against the
// longer image it came from, or the reverse). `length` > 0: cmp -n 0 compares nothing.
bool SameBytes(const std::string& copy, const std::string& original, uint64_t length);
// The whole file (empty when it cannot be read). One read(2) per MiB: an istreambuf_iterator
// copies a byte at a time, 5 MB/s under AddressSanitizer.
std::string FileContents(const std::string& path);
// Runs `sql` on the SQLite database at `db_path` (a test's tampering); fails the test on error.
void Sql(const std::string& db_path, const std::string& sql);
// The one integer a query (SELECT COUNT(*) …) returns from the SQLite file at `db_path`.
int64_t SqlInt(const std::string& db_path, const std::string& sql);
// The first column of the first row a query returns from the SQLite file at `db_path`, as
// text (empty for NULL): a whole table's rows compared at once with group_concat.
std::string SqlText(const std::string& db_path, const std::string& sql);
// CHECKs that the command exited `exit_code` with one line on stderr that contains `says`.
void CheckOneLineError(const RunResult& r, int exit_code, const std::string& says);
// Every regular file under `dir` with its contents: equal before and after = nothing written.
std::map<std::string, std::string> TreeContents(const std::string& dir);

}  // namespace wanbackup::testing
