// Text the user gives (tags, paths) that a snapshot record, which is JSON, cannot hold: refused in
// one line before anything is written; and --json output that names such a path stays JSON.
#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/repo_cli.h"

namespace wanbackup::testing {
namespace {

TEST_CASE("snapshot: a source name or tag that is not printable UTF-8 is refused, nothing written",
          "[cli]") {
  TempDir dir{"text-input"};
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string odd = dir / "disk\xFE.img";  // a Linux name may be any bytes but '/' and NUL
  WriteNoiseImage(odd, 1, 2);
  const auto before = TreeContents(repo.path());

  const RunResult name = repo.Wb({"snapshot", odd});
  INFO(name.err);
  CHECK(name.exit_code == 2);
  CHECK(name.err.find("is not UTF-8 text") != std::string::npos);
  CHECK(name.err.find("terminate") == std::string::npos);
  for (const std::string& tag : {std::string("a\tb"), std::string("line\nbreak"),
                                 std::string("x\xFFy"), std::string(257, 't')}) {
    const RunResult r = repo.Wb({"snapshot", odd, "--tag", tag});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--tag: the tag ") != std::string::npos);
  }
  auto after = TreeContents(repo.path());
  after[repo.path() + "/lock"] = before.at(repo.path() + "/lock");  // names the last holder
  CHECK(after == before);

  // A destination named so is fine (nothing records it), and --json still prints JSON.
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 1, 2);
  repo.Ok({"snapshot", image, "--tag",
           "n\xC3\xA4"
           "chtlich"});
  const RunResult restored = repo.Wb({"restore", "1", "--to", dir / "back\xFD.img", "--json"});
  INFO(restored.err);
  REQUIRE(restored.exit_code == 0);
  CHECK(nlohmann::json::parse(restored.out)["destination"] ==
        (dir / "back\xEF\xBF\xBD.img"));  // U+FFFD for the byte
  CHECK(SameFile(dir / "back\xFD.img", image));

  // The TAG column is as wide as its longest tag in characters: "nächtlich" is 9, not 10.
  const RunResult table = repo.Ok({"snapshots"});
  CHECK(table.out.find("TAG       SOURCE") != std::string::npos);
  CHECK(table.out.find("n\xC3\xA4"
                       "chtlich " +
                       image) != std::string::npos);
}

TEST_CASE(
    "snapshots, messages: a source named with a newline, an escape sequence or a bidi override "
    "is shown escaped, never raw",
    "[cli]") {
  TempDir dir{"text-output"};
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  // A line of its own and a colour in the name, then U+202E (right-to-left override).
  const std::string odd = dir / "a\nID 99 fake\x1b[31mred\xE2\x80\xAEgpj.img";
  WriteNoiseImage(odd, 1, 2);
  const RunResult taken = repo.Ok({"snapshot", odd});
  const RunResult table = repo.Ok({"snapshots"});
  for (const std::string& text : {taken.err, table.out}) {
    INFO(text);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("\xE2\x80\xAE") == std::string::npos);
    CHECK(text.find("\nID 99") == std::string::npos);
    CHECK(text.find("a\\x0aID 99 fake\\x1b[31mred\\u202egpj.img") != std::string::npos);
  }
  // The table has its header and one row, however the name tried to add one.
  size_t lines = 0;
  for (const char c : table.out)
    lines += c == '\n' ? 1 : 0;
  CHECK(lines == 2);
  // --json keeps the name as it is.
  CHECK(nlohmann::json::parse(repo.Ok({"snapshots", "--json"}).out)[0]["source"] == odd);
}

TEST_CASE(
    "snapshot: a tag the mount view cannot show ('.', '..', 'latest', digits, '/') is "
    "refused in one line, nothing written",
    "[cli]") {
  TempDir dir{"tag-names"};
  RepoCli repo{dir};
  repo.Ok({"init", "--key-file", repo.key(), "--chunk-size", "64K"});
  const std::string image = dir / "disk.img";
  WriteNoiseImage(image, 2, 2);
  const auto before = TreeContents(repo.path());
  for (const std::string tag : {".", "..", "latest", "1", "99", "0007", "a/b", "/"}) {
    const RunResult r = repo.Wb({"snapshot", image, "--tag", tag});
    INFO(tag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--tag: the tag '" + tag + "' is not allowed") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // Nor one that reads as another tag: white space at an end, a character that shows as nothing
  // (before: three entries that all read "latest" in the mount view; round 9, Z6).
  const std::pair<std::string, std::string> lookalikes[] = {
      {"latest ", "begins or ends with white space"},
      {" ", "begins or ends with white space"},
      {"latest\xC2\xA0", "begins or ends with white space"},
      {"late\xE2\x80\x8Bst", "holds U+200B, a character that shows as nothing"},
      {"\xEF\xBB\xBFnightly", "holds U+FEFF"},
  };
  for (const auto& [tag, says] : lookalikes) {
    const RunResult r = repo.Wb({"snapshot", image, "--tag", tag});
    INFO(tag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--tag: the tag " + says) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  auto after = TreeContents(repo.path());
  if (after.count(repo.path() + "/lock") != 0 && before.count(repo.path() + "/lock") != 0) {
    after[repo.path() + "/lock"] = before.at(repo.path() + "/lock");
  }
  CHECK(after == before);
  // Names that only look alike are tags like any other.
  for (const std::string tag : {"latest-good", "v1", "1a", "..x", "x.", "nightly run"})
    repo.Ok({"snapshot", image, "--tag", tag});
  CHECK(repo.Ok({"snapshots"}).out.find("latest-good") != std::string::npos);
}

}  // namespace
}  // namespace wanbackup::testing
