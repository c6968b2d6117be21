#include "support/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <sstream>

#include <catch2/catch.hpp>

#include "support/other_user.h"

namespace wanbackup::testing {
namespace {

// A root-owned directory below /var/tmp for this build tree, when the build tree itself cannot
// be searched by other users (a checkout below a 0700 home or `mktemp -d`): tests that act as
// another user need to reach their files. Empty when it cannot be made safely.
std::string SharedBase() {
  std::ostringstream name;
  name << "/var/tmp/wanbackup-tests." << std::hex << std::hash<std::string>{}(WB_TEST_TMP_DIR);
  std::string base = name.str();
  ::mkdir(base.c_str(), 0755);  // EEXIST: made by an earlier test
  struct stat st {};
  // /var/tmp is writable by everyone: use the directory only if it is root's own, as made here.
  if (::lstat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "";
  }
  return base;
}

const std::string& DefaultParent() {
  static const std::string parent = [] {
    ::mkdir(WB_TEST_TMP_DIR, 0755);  // EEXIST: made by an earlier test
    if (!CanSwitchUser() || OtherUserCanSearch(WB_TEST_TMP_DIR))
      return std::string(WB_TEST_TMP_DIR);
    const std::string shared = SharedBase();
    return shared.empty() ? std::string(WB_TEST_TMP_DIR) : shared;
  }();
  return parent;
}

}  // namespace

TempDir::TempDir(const std::string& label, const std::string& parent) {
  std::string tmpl = (parent.empty() ? DefaultParent() : parent) + "/wb-" + label + "-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace wanbackup::testing
