// Running the real wanbackup binary against a repository in a test's temporary directory, and
// the images those tests snapshot. Not thread-safe; one per test.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace wanbackup::testing {

inline constexpr uint64_t kTestChunk = 4u << 20;

class RepoCli {
 public:
  // A repository at dir/repo, unlocked with the key file dir/repo.key (no Argon2 per command)
  // or, when a passphrase is given to Wb/Ok, with it.
  explicit RepoCli(const TempDir& dir) : dir_(dir), path_(dir / "repo"), key_(dir / "repo.key") {}

  RunResult Wb(std::vector<std::string> args, const std::string& passphrase = "",
               const std::map<std::string, std::string>& env = {}) const;
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
bool SameFile(const std::string& a, const std::string& b);
// Every regular file under `dir` with its contents: equal before and after = nothing written.
std::map<std::string, std::string> TreeContents(const std::string& dir);

}  // namespace wanbackup::testing
