#include "support/temp_dir.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace wanbackup::testing {

TempDir::TempDir(const std::string& label, const std::string& parent) {
  std::string tmpl = parent + "/wb-" + label + "-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace wanbackup::testing
