#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "pipeline/copier.h"
#include "pipeline/file_sink.h"
#include "pipeline/file_source.h"
#include "support/other_user.h"
#include "support/skip.h"
#include "support/temp_dir.h"

using wanbackup::StatusCode;
using wanbackup::pipeline::FileSink;
using wanbackup::pipeline::FileSinkOptions;
using wanbackup::pipeline::FileSource;

namespace {

struct FileIoDir : wanbackup::testing::TempDir {
  FileIoDir() : wanbackup::testing::TempDir("fileio") {}
};

std::vector<uint8_t> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("file sink: an existing file is kept unless overwriting is asked for", "[fileio]") {
  FileIoDir dir;
  const std::string path = dir.path() + "/out.img";
  std::ofstream(path) << "precious";
  auto refused = FileSink::Open(path, FileSinkOptions{});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
  CHECK(refused.status().message().find("--force") != std::string::npos);
  CHECK(FileBytes(path) == std::vector<uint8_t>{'p', 'r', 'e', 'c', 'i', 'o', 'u', 's'});
  FileSinkOptions force;
  force.overwrite = true;
  CHECK(FileSink::Open(path, force).ok());
}

TEST_CASE("file sink: new files are private and keep holes where nothing was written", "[fileio]") {
  FileIoDir dir;
  const std::string path = dir.path() + "/sparse.img";
  auto sink = FileSink::Open(path, FileSinkOptions{});
  REQUIRE(sink.ok());
  CHECK((*sink)->zeros_are_free());
  const std::vector<uint8_t> block(4096, 0xab);
  REQUIRE((*sink)->Write(64 << 20, block.data(), block.size()).ok());
  REQUIRE((*sink)->Finish(128 << 20).ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_size == 128 << 20);
  CHECK(st.st_blocks * 512 < (1 << 20));  // 128 MiB long, a few KiB stored
}

TEST_CASE("file sink: a directory or a missing parent is refused clearly", "[fileio]") {
  FileIoDir dir;
  CHECK(FileSink::Open(dir.path(), FileSinkOptions{}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(FileSink::Open(dir.path() + "/no/such/dir/x.img", FileSinkOptions{}).status().code() ==
        StatusCode::kNotFound);
}

TEST_CASE("file source to file sink: a copy of an odd-sized file is bit-exact", "[fileio]") {
  FileIoDir dir;
  const std::string in = dir.path() + "/in.img", out = dir.path() + "/out.img";
  std::vector<uint8_t> data(9 * 1024 * 1024 + 123);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  std::fill(data.begin() + 1000000, data.begin() + 5000000, 0);
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  auto source = FileSource::Open(in);
  REQUIRE(source.ok());
  CHECK((*source)->geometry().size_bytes == data.size());
  auto sink = FileSink::Open(out, FileSinkOptions{});
  REQUIRE(sink.ok());
  auto result = wanbackup::pipeline::Copy(**source, **sink, {});
  REQUIRE(result.ok());
  CHECK(result->zero_bytes_skipped > 3000000);
  CHECK(FileBytes(out) == data);
}

TEST_CASE("file source: a missing or empty file is refused", "[fileio]") {
  FileIoDir dir;
  CHECK(FileSource::Open(dir.path() + "/missing").status().code() == StatusCode::kNotFound);
  { std::ofstream empty(dir.path() + "/empty"); }  // created, and closed at once
  CHECK(FileSource::Open(dir.path() + "/empty").status().code() == StatusCode::kInvalidArgument);
}

namespace {

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("file sink: a replacement left unfinished leaves the old file untouched", "[fileio]") {
  FileIoDir dir;
  const std::string path = dir.path() + "/out.img";
  std::ofstream(path) << "precious";
  FileSinkOptions force;
  force.overwrite = true;
  {
    auto sink = FileSink::Open(path, force);
    REQUIRE(sink.ok());
    const std::vector<uint8_t> block(4096, 0xab);
    REQUIRE((*sink)->Write(0, block.data(), block.size()).ok());
    CHECK(Entries(dir.path()) == 2);  // the data goes to a file beside it
  }
  CHECK(FileBytes(path) == std::vector<uint8_t>{'p', 'r', 'e', 'c', 'i', 'o', 'u', 's'});
  CHECK(Entries(dir.path()) == 1);  // and that file is gone
}

TEST_CASE("file sink: a finished replacement is whole, private and leaves nothing beside it",
          "[fileio]") {
  FileIoDir dir;
  const std::string path = dir.path() + "/out.img";
  std::ofstream(path) << "precious";
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  FileSinkOptions force;
  force.overwrite = true;
  auto sink = FileSink::Open(path, force);
  REQUIRE(sink.ok());
  const std::vector<uint8_t> block(4096, 0xab);
  REQUIRE((*sink)->Write(4096, block.data(), block.size()).ok());
  REQUIRE((*sink)->Finish(3 * 4096).ok());
  std::vector<uint8_t> expected(3 * 4096, 0);
  std::fill(expected.begin() + 4096, expected.begin() + 8192, 0xab);
  CHECK(FileBytes(path) == expected);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(Entries(dir.path()) == 1);
}

TEST_CASE("file source: direct reads at unaligned offsets and lengths are exact", "[fileio]") {
  FileIoDir dir;
  const std::string in = dir.path() + "/in.img";
  std::vector<uint8_t> data(3 * 1024 * 1024 + 123);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  auto source = FileSource::Open(in, 2, true);
  REQUIRE(source.ok());
  for (uint64_t offset :
       {uint64_t{0}, uint64_t{777}, uint64_t{4096}, uint64_t{data.size() - 5000}}) {
    INFO("offset " << offset);
    const uint64_t length = std::min<uint64_t>(1 << 20, data.size() - offset);
    std::vector<uint8_t> got(length);
    REQUIRE((*source)->Submit({offset, length, got.data(), 0}).ok());
    auto done = (*source)->Wait();
    REQUIRE(done.ok());
    REQUIRE(done->status.ok());
    CHECK(std::equal(got.begin(), got.end(), data.begin() + static_cast<ptrdiff_t>(offset)));
  }
}

TEST_CASE(
    "file sink: a FIFO another user planted in a directory others can write is refused, and one "
    "nobody reads does not hang",
    "[fileio]") {
  if (!wanbackup::testing::CanSwitchUser()) WB_SKIP("needs root to act as another user");
  wanbackup::testing::TempDir dir("file-sink");
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string pub = dir / "pub";
  REQUIRE(::mkdir(pub.c_str(), 0700) == 0);
  REQUIRE(::chmod(pub.c_str(), 01777) == 0);
  const std::string planted = pub + "/a.img";
  REQUIRE(
      wanbackup::testing::AsOtherUser([&planted] { return ::mkfifo(planted.c_str(), 0666) == 0; }));
  // A reader waits on it, as the other user's would: the open would not block.
  const int reader = ::open(planted.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);
  auto sink = wanbackup::pipeline::FileSink::Open(planted, {});
  ::close(reader);
  REQUIRE(!sink.ok());
  CHECK(sink.status().code() == wanbackup::StatusCode::kInvalidArgument);
  CHECK_THAT(
      sink.status().message(),
      Catch::Contains(planted + " is a FIFO owned by uid 65534 in a directory others can write"));
  // Our own FIFO with nobody reading it: refused at once, not waited on.
  const std::string ours = dir / "ours.fifo";
  REQUIRE(::mkfifo(ours.c_str(), 0600) == 0);
  auto lonely = wanbackup::pipeline::FileSink::Open(ours, {});
  REQUIRE(!lonely.ok());
  CHECK_THAT(lonely.status().message(), Catch::Contains("is a FIFO that nobody reads"));
}

TEST_CASE("file source: a FIFO in the source's place is refused at once, never waited on",
          "[file]") {
  wanbackup::testing::TempDir dir("fifo-source");
  const std::string fifo = dir / "disk.img";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Nobody writes it: a blocking open would wait here for ever (the runner's timeout).
  for (const bool direct : {false, true}) {
    auto src = FileSource::Open(fifo, 1, direct);
    REQUIRE(!src.ok());
    CHECK(src.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(src.status().message(),
               Catch::Contains("is neither a regular file nor a block device"));
  }
}
