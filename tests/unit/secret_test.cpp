#include "common/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "common/cancel.h"
#include "support/temp_dir.h"

using namespace wanbackup;

namespace {

// A file in a fresh test directory (wanbackup refuses a secret under /tmp: others write there).
std::string TempFile(const std::string& content, mode_t mode) {
  static wanbackup::testing::TempDir dir("secret");
  static int serial = 0;
  std::string path = dir / ("secret-" + std::to_string(++serial));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  ::fchmod(fd, mode);
  ::close(fd);
  return path;
}

}  // namespace

TEST_CASE("secret file: the first line without its line ending is the secret", "[secret]") {
  const std::string path = TempFile("s3cret-value\r\nsecond line\n", 0600);
  Result<Secret> s = ReadSecretFile(path);
  ::unlink(path.c_str());
  REQUIRE(s.ok());
  CHECK(s->reveal() == "s3cret-value");
}

TEST_CASE("secret file: a file others can read is refused, as the job config refuses it",
          "[secret]") {
  const std::string path = TempFile("x\n", 0644);
  Result<Secret> s = ReadSecretFile(path);
  ::unlink(path.c_str());
  CHECK(s.status().code() == StatusCode::kPermissionDenied);
  CHECK(s.status().message() ==
        path + ": readable by others (mode 0644); it holds a secret: chmod 600 " + path);
}

TEST_CASE("secret file: empty and missing files are errors", "[secret]") {
  const std::string path = TempFile("", 0600);
  Result<Secret> empty = ReadSecretFile(path);
  ::unlink(path.c_str());
  CHECK(empty.status().code() == StatusCode::kInvalidArgument);
  CHECK(empty.status().message() == "secret file " + path + " is empty");
  CHECK(ReadSecretFile("/nonexistent/secret").status().code() == StatusCode::kNotFound);
}

TEST_CASE("secret file: a blank first line is refused as such, not as an empty file", "[secret]") {
  for (const char* content : {"\n", "\r\nsecret on the second line\n"}) {
    const std::string path = TempFile(content, 0600);
    Result<Secret> blank = ReadSecretFile(path);
    ::unlink(path.c_str());
    CHECK(blank.status().code() == StatusCode::kInvalidArgument);
    CHECK(blank.status().message() ==
          "secret file " + path + ": its first line is empty; put the secret on the first line");
  }
}

TEST_CASE("secret: moving leaves the source empty", "[secret]") {
  Secret a("abc");
  Secret b = std::move(a);
  CHECK(b.reveal() == "abc");
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): the point of the test
}

TEST_CASE("secret: environment variables are read and unset ones are empty", "[secret]") {
  ::setenv("WB_TEST_SECRET", "from-env", 1);
  CHECK(SecretFromEnv("WB_TEST_SECRET").reveal() == "from-env");
  ::unsetenv("WB_TEST_SECRET");
  CHECK(SecretFromEnv("WB_TEST_SECRET").empty());
}

TEST_CASE(
    "secret file: a FIFO whose writer is silent ends at SIGINT or SIGTERM instead of holding the "
    "command, and one that writes is read",
    "[secret]") {
  static wanbackup::testing::TempDir dir("secret-fifo");
  const std::string fifo = dir / "pass.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A writer that holds the FIFO open and writes nothing (O_RDWR: open without waiting).
  const int writer = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(writer >= 0);
  std::thread signal_later([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    RequestCancellation();  // what the SIGINT/SIGTERM handler does
  });
  const Result<Secret> silent = ReadSecretFile(fifo);
  signal_later.join();
  CancellationFlag().store(false);
  CHECK(silent.status().code() == StatusCode::kCancelled);
  CHECK(silent.status().message() == "interrupted while waiting for secret file " + fifo);
  // The same FIFO, written to after a while: the first line is the secret.
  std::thread write_later([writer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string line = "fifo-pass\n";
    CHECK(::write(writer, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  });
  const Result<Secret> written = ReadSecretFile(fifo);
  write_later.join();
  ::close(writer);
  REQUIRE(written.ok());
  CHECK(written->reveal() == "fifo-pass");
}
