// What the S3 repository tests share (s3_repository_test.cpp, s3_crash_test.cpp): a "host"
// that runs the real binary in site A against a repository in the s3lab fixture's bucket, and
// a listing of the objects under a repository's prefix. Not thread-safe; one per test.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/repo_cli.h"

namespace wanbackup::testing {

// One host using the S3 repository at `url`: its own catalog cache and trust anchors, the
// repository's key file shared by every host.
struct S3Host {
  S3Host(const TempDir& dir, const std::string& name, std::string repo_url);

  // The options Wb runs the binary with: the lab's keys, this host's places, then `env`.
  RunOptions Options(const std::map<std::string, std::string>& env = {}) const;
  RunResult Wb(std::vector<std::string> args,
               const std::map<std::string, std::string>& env = {}) const;
  // As Wb, and REQUIREs exit 0 (printing the output when not).
  RunResult Ok(std::vector<std::string> args) const;
  size_t SnapshotCount() const;
  // The ids of the complete snapshots it lists.
  std::set<int64_t> SnapshotIds() const;

  std::string cache, security, key, url;
};

// A new repository URL: the lab's bucket with a prefix of its own.
std::string NewS3RepoUrl();

// Writes a lock object `kind` ("shared", "writer", "exclusive") as a wanbackup on another host
// ("other-host", pid 4242) would, refreshed `age_s` seconds ago; a second call replaces it.
void PlantS3Lock(const std::string& url, const std::string& kind, int64_t age_s);

// True once process `pid` is stopped (a pausepoint's SIGSTOP); false after 60 s.
bool WaitStopped(pid_t pid);

// Removes the object `key` (a key S3ObjectsAt names) from the lab's bucket.
void RemoveS3Object(const std::string& url, const std::string& key);

// The bytes of the object `key` (a key S3ObjectsAt names, of `size` bytes).
std::vector<uint8_t> ReadS3Object(const std::string& url, const std::string& key, uint64_t size);
// Makes `bytes` the object `key`, replacing what was there: a pack swapped in the bucket.
void PutS3Object(const std::string& url, const std::string& key, const std::vector<uint8_t>& bytes);

// Overwrites `text` at `offset` of the object `key` (a key S3ObjectsAt names, of `size` bytes):
// a pack damaged in the bucket.
void ScribbleS3Object(const std::string& url, const std::string& key, uint64_t size,
                      uint64_t offset, const std::string& text);

// Every object under the location's prefix, with its size: equal before and after = nothing
// was written.
std::map<std::string, uint64_t> S3ObjectsAt(const std::string& url);
// The pack objects among them.
std::map<std::string, uint64_t> S3PacksAt(const std::string& url);

}  // namespace wanbackup::testing
