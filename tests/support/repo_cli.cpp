#include "support/repo_cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <catch2/catch.hpp>
#include <sqlite3.h>

namespace wanbackup::testing {

RunOptions WithPass(const std::string& passphrase) {
  RunOptions o;
  o.env["WANBACKUP_PASSWORD"] = passphrase;
  o.timeout = std::chrono::seconds(120);
  return o;
}

RunResult Local(std::vector<std::string> args, const RunOptions& options) {
  args.insert(args.begin(), WB_WANBACKUP_BIN);
  return Run(args, options);
}

nlohmann::json Json(const RunResult& r) {
  INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

RunResult RepoCli::Wb(std::vector<std::string> args, const std::string& passphrase,
                      const std::map<std::string, std::string>& env) const {
  RunOptions o;
  o.env = env;
  o.env["WANBACKUP_REPO"] = path_;
  if (passphrase.empty()) {
    o.env.emplace("WANBACKUP_KEY_FILE", key_);  // unless `env` names one (or "": none)
  } else {
    o.env["WANBACKUP_PASSWORD"] = passphrase;
  }
  o.timeout = std::chrono::seconds(120);
  return Local(std::move(args), o);
}

RunResult RepoCli::WbIn(const std::string& cwd, std::vector<std::string> args) const {
  RunOptions o;
  o.env["WANBACKUP_REPO"] = path_;
  o.env["WANBACKUP_KEY_FILE"] = key_;
  o.timeout = std::chrono::seconds(120);
  o.cwd = cwd;
  return Local(std::move(args), o);
}

RunResult RepoCli::Ok(std::vector<std::string> args, const std::string& passphrase,
                      const std::map<std::string, std::string>& env) const {
  std::string command;
  for (const std::string& a : args)
    command += " " + a;
  RunResult r = Wb(std::move(args), passphrase, env);
  INFO("wanbackup" << command << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

void WriteNoiseImage(const std::string& path, uint64_t seed, size_t chunks) {
  // A 64-bit word at a time: the tests build at -O0, and byte by byte under ASan took seconds.
  std::vector<uint64_t> data(chunks * kTestChunk / sizeof(uint64_t), 0);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < data.size(); ++i) {
    if (i * sizeof(uint64_t) / kTestChunk == 1) continue;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    data[i] = x;
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()),
             static_cast<std::streamsize>(data.size() * sizeof(uint64_t)));
}

void Scribble(const std::string& path, uint64_t offset, const std::string& text) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

void CheckOneLineError(const RunResult& r, int exit_code, const std::string& says) {
  INFO("exit " << r.exit_code << "\nstderr: " << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK_THAT(r.err, Catch::Contains(says));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

bool SameFile(const std::string& a, const std::string& b) {
  return Run({"cmp", "-s", a, b}).exit_code == 0;
}

bool SameBytes(const std::string& copy, const std::string& original, uint64_t length) {
  return Run({"cmp", "-s", "-n", std::to_string(length), copy, original}).exit_code == 0;
}

std::string FileContents(const std::string& path) {
  std::string data;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return data;
  constexpr size_t kStep = 1u << 20;
  for (;;) {
    const size_t have = data.size();
    data.resize(have + kStep);
    const ssize_t n = ::read(fd, data.data() + have, kStep);
    data.resize(have + static_cast<size_t>(n > 0 ? n : 0));
    if (n <= 0) break;
  }
  ::close(fd);
  return data;
}

void Sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO(sql << ": " << (err != nullptr ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

int64_t SqlInt(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

std::string SqlText(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const unsigned char* text = sqlite3_column_text(st, 0);
  std::string v = text == nullptr ? std::string() : reinterpret_cast<const char*>(text);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

std::map<std::string, std::string> TreeContents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = FileContents(e.path().string());
  }
  return files;
}

}  // namespace wanbackup::testing
