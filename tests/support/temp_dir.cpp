#include "support/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace wanbackup::testing {

TempDir::TempDir(const std::string& label, const std::string& parent) {
  if (parent.empty()) ::mkdir(WB_TEST_TMP_DIR, 0755);  // EEXIST: made by an earlier test
  std::string tmpl =
      (parent.empty() ? std::string(WB_TEST_TMP_DIR) : parent) + "/wb-" + label + "-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace wanbackup::testing
