// A temporary directory for a test, removed with everything in it when the test ends.
// Not thread-safe; one per test.
#pragma once

#include <filesystem>
#include <string>

namespace wanbackup::testing {

class TempDir {
 public:
  // Creates <parent>/wb-<label>-XXXXXX (fails the test when it cannot). The default parent is
  // the build tree's test-tmp/ (0755, root's), not /tmp: wanbackup refuses config and credential
  // files below a directory others can write (common/file_trust.h), and /tmp is one. When
  // run as root from a build tree other users cannot search, the default parent is a root-owned
  // 0755 directory below /var/tmp instead, so that tests acting as another user reach it.
  explicit TempDir(const std::string& label = "test", const std::string& parent = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace wanbackup::testing
