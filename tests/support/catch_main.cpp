// Catch2's main, with one thing first: every wanbackup the tests run keeps its trust anchors
// (repository/trust_anchor.h) in a temporary directory of this test process, never in the
// invoking user's state directory. Removed when the tests end.
#define CATCH_CONFIG_RUNNER
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  std::string dir = (std::filesystem::temp_directory_path() / "wb-security-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return 1;
  ::setenv("WANBACKUP_SECURITY_DIR", dir.c_str(), 1);
  const int result = Catch::Session().run(argc, argv);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}
