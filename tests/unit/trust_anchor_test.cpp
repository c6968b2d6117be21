#include "repository/trust_anchor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "repository/repository_trust.h"
#include "support/temp_dir.h"

using wanbackup::StatusCode;
using wanbackup::pipeline::AnchorRecord;
using wanbackup::pipeline::CheckAgainstAnchor;
using wanbackup::pipeline::DecodeAnchor;
using wanbackup::pipeline::EncodeAnchor;
using wanbackup::pipeline::RecordObservation;
using wanbackup::pipeline::TrustAnchorStore;
using wanbackup::pipeline::TrustObservation;

namespace {

const std::string kId = "0123456789abcdef0123456789abcdef";
const std::string kOtherId = "fedcba9876543210fedcba9876543210";

AnchorRecord Known() {
  AnchorRecord r;
  r.repository_id = kId;
  r.encryption = "passphrase";
  r.key_fingerprint = std::string(64, 'a');
  r.head_counter = 5;
  r.locations = {"/backup/db"};
  return r;
}

TrustObservation Now() {
  TrustObservation o;
  o.repository_id = kId;
  o.location = "/backup/db";
  o.encryption = "passphrase";
  o.key_fingerprint = std::string(64, 'a');
  o.head_counter = 5;
  return o;
}

std::string Refusal(const std::optional<AnchorRecord>& known, const TrustObservation& now,
                    const std::optional<std::string>& other = std::nullopt) {
  const wanbackup::Status s = CheckAgainstAnchor(known, other, now);
  if (s.ok()) return "";
  CHECK(s.code() == StatusCode::kCorruption);  // exit 3
  CHECK(s.message().find("wanbackup trust") != std::string::npos);
  return s.message();
}

}  // namespace

TEST_CASE("anchor rules: a repository as this client knew it, or never saw, passes", "[anchor]") {
  CHECK(Refusal(Known(), Now()).empty());
  CHECK(Refusal(std::nullopt, Now()).empty());
  TrustObservation higher = Now();
  higher.head_counter = 9;
  CHECK(Refusal(Known(), higher).empty());
  TrustObservation unread = Now();  // repair: the head is not read
  unread.head_counter.reset();
  unread.key_fingerprint.clear();  // before unlocking
  CHECK(Refusal(Known(), unread).empty());
  TrustObservation keyfile = Now();  // key change to a key file keeps the master key
  keyfile.encryption = "keyfile";
  CHECK(Refusal(Known(), keyfile).empty());
}

TEST_CASE("anchor rules: a repository suddenly unencrypted is refused", "[anchor]") {
  TrustObservation now = Now();
  now.encryption = "none";
  CHECK(Refusal(Known(), now).find("NOT encrypted") != std::string::npos);
}

TEST_CASE("anchor rules: another id at a known location is refused", "[anchor]") {
  TrustObservation now = Now();
  now.repository_id = kOtherId;
  CHECK(Refusal(std::nullopt, now, kId).find("was replaced") != std::string::npos);
}

TEST_CASE("anchor rules: another key for the same id is refused", "[anchor]") {
  TrustObservation now = Now();
  now.key_fingerprint = std::string(64, 'b');
  CHECK(Refusal(Known(), now).find("another key") != std::string::npos);
}

TEST_CASE("anchor rules: a lower head counter, or no head at all, is refused", "[anchor]") {
  TrustObservation now = Now();
  now.head_counter = 4;
  CHECK(Refusal(Known(), now).find("shows head 4, but this client saw head 5") !=
        std::string::npos);
  now.head_counter = 0;
  CHECK(Refusal(Known(), now).find("has no head") != std::string::npos);
}

TEST_CASE("anchor rules: an observation raises the counter and adds the location", "[anchor]") {
  std::optional<AnchorRecord> known;
  CHECK(RecordObservation(known, Now()));
  REQUIRE(known);
  CHECK(known->head_counter == 5);
  CHECK_FALSE(RecordObservation(known, Now()));
  TrustObservation moved = Now();
  moved.location = "/mnt/copy";
  moved.head_counter = 6;
  CHECK(RecordObservation(known, moved));
  CHECK(known->head_counter == 6);
  CHECK(known->locations == std::vector<std::string>{"/backup/db", "/mnt/copy"});
  TrustObservation lower = Now();
  lower.head_counter = 2;  // never lowered (CheckAgainstAnchor refuses it first)
  RecordObservation(known, lower);
  CHECK(known->head_counter == 6);
}

TEST_CASE("anchor file: encoded anchors decode, damaged ones are Corruption", "[anchor]") {
  auto back = DecodeAnchor(EncodeAnchor(Known()));
  REQUIRE(back.ok());
  CHECK(back->repository_id == kId);
  CHECK(back->head_counter == 5);
  CHECK(back->locations == Known().locations);
  for (const std::string& bad :
       {std::string(""), std::string("wanbackup-trust-anchor 2\n"),
        EncodeAnchor(Known()) + "colour blue\n", EncodeAnchor(Known()) + "nonsense\n"}) {
    INFO(bad);
    CHECK_FALSE(DecodeAnchor(bad).ok());
  }
  std::string negative = EncodeAnchor(Known());
  negative.replace(negative.find("head_counter 5"), 14, "head_counter -5");
  CHECK_FALSE(DecodeAnchor(negative).ok());
  // The highest snapshot number: written once there is one, and an anchor without it (written
  // before it existed) decodes as 0.
  CHECK(EncodeAnchor(Known()).find("highest_snapshot") == std::string::npos);
  AnchorRecord high = Known();
  high.highest_snapshot = 42;
  auto again = DecodeAnchor(EncodeAnchor(high));
  REQUIRE(again.ok());
  CHECK(again->highest_snapshot == 42);
  CHECK_FALSE(DecodeAnchor(EncodeAnchor(high) + "highest_snapshot 43\n").ok());
}

TEST_CASE("anchor rules: the highest snapshot number seen is raised, never lowered", "[anchor]") {
  std::optional<AnchorRecord> known;
  TrustObservation now = Now();
  now.highest_snapshot = 7;
  CHECK(RecordObservation(known, now));
  REQUIRE(known);
  CHECK(known->highest_snapshot == 7);
  now.highest_snapshot = 3;  // a catalog that fell behind: its lost numbers stay taken
  CHECK_FALSE(RecordObservation(known, now));
  CHECK(known->highest_snapshot == 7);
}

TEST_CASE("anchor store: anchors are 0600 files in 0700 directories, found by location",
          "[anchor]") {
  wanbackup::testing::TempDir dir("anchors");
  const TrustAnchorStore store(dir / "security");
  auto none = store.Load(kId);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(store
              .Update(kId,
                      [](std::optional<AnchorRecord>& r) {
                        r = Known();
                        return true;
                      })
              .ok());
  struct stat st {};
  REQUIRE(::stat((dir / "security/" + kId).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((dir / "security/" + kId + "/anchor").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto loaded = store.Load(kId);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  CHECK((*loaded)->head_counter == 5);
  auto at = store.IdAt("/backup/db", kOtherId);
  REQUIRE(at.ok());
  CHECK(*at == std::optional<std::string>(kId));
  auto self = store.IdAt("/backup/db", kId);
  REQUIRE(self.ok());
  CHECK_FALSE(self->has_value());
  CHECK_FALSE(store.Load("../../etc").ok());
}

TEST_CASE("anchor store: a directory others can write or own is refused, nothing read or written",
          "[anchor]") {
  wanbackup::testing::TempDir dir("anchors-open");
  const std::string security = dir / "security";
  REQUIRE(::mkdir(security.c_str(), 0700) == 0);
  REQUIRE(::chmod(security.c_str(), 0777) == 0);
  const TrustAnchorStore store(security);
  auto write = [&store] {
    return store.Update(kId, [](std::optional<AnchorRecord>& r) {
      r = Known();
      return true;
    });
  };
  const wanbackup::Status written = write();
  CHECK(written.code() == wanbackup::StatusCode::kPermissionDenied);
  CHECK_THAT(written.message(), Catch::Contains("is writable by group or others"));
  CHECK(store.Load(kId).status().code() == wanbackup::StatusCode::kPermissionDenied);
  CHECK_FALSE(std::filesystem::exists(security + "/" + kId));
  REQUIRE(::chmod(security.c_str(), 0700) == 0);
  CHECK(write().ok());
  if (::geteuid() == 0) {
    REQUIRE(::chown(security.c_str(), 65534, 65534) == 0);
    CHECK_THAT(store.Load(kId).status().message(), Catch::Contains("is owned by uid 65534"));
  }
}

TEST_CASE("anchor file: a location with a newline is never written, so it cannot set a key",
          "[anchor]") {
  wanbackup::testing::TempDir dir("anchor-inject");
  const TrustAnchorStore store(dir / "security");
  AnchorRecord evil = Known();
  evil.locations = {"/x\nhead_counter 0"};
  CHECK(wanbackup::pipeline::CheckAnchorValues(evil).code() == StatusCode::kInvalidArgument);
  const wanbackup::Status written = store.Update(kId, [&](std::optional<AnchorRecord>& r) {
    r = evil;
    return true;
  });
  CHECK(written.code() == StatusCode::kInvalidArgument);
  CHECK(written.message().find("\\x0a") != std::string::npos);
  auto loaded = store.Load(kId);
  REQUIRE(loaded.ok());
  CHECK_FALSE(loaded->has_value());  // nothing was written
  for (const char* control : {"/a\rb", "/a\tb", "/a\x7f"}) {
    AnchorRecord r = Known();
    r.locations = {control};
    CHECK_FALSE(wanbackup::pipeline::CheckAnchorValues(r).ok());
  }
  CHECK(wanbackup::pipeline::CheckAnchorValues(Known()).ok());
}

TEST_CASE("anchor file: a single-value key twice, or a malformed line, is Corruption", "[anchor]") {
  const std::string good = EncodeAnchor(Known());
  for (const std::string& bad :
       {good + "head_counter 0\n", good + ("repository_id " + std::string(kOtherId) + "\n"),
        good + "encryption none\n", good + "key_fingerprint " + std::string(64, 'b') + "\n",
        good + "location\n", good + "location \n", good + " /x\n", good + "location /a\rb\n",
        good.substr(0, good.size() - 1), good + "\n"}) {
    INFO(bad);
    CHECK(DecodeAnchor(bad).status().code() == StatusCode::kCorruption);
  }
  std::string twice = good;
  twice.replace(twice.find("head_counter 5"), 14, "head_counter 5\nhead_counter 9");
  CHECK(DecodeAnchor(twice).status().message().find("'head_counter' appears twice") !=
        std::string::npos);
  for (const char* counter : {"+5", "5 ", "0x5", "18446744073709551616", "99999999999999999999"}) {
    std::string bad = good;
    bad.replace(bad.find("head_counter 5"), 14, std::string("head_counter ") + counter);
    INFO(bad);
    CHECK_FALSE(DecodeAnchor(bad).ok());
  }
  std::string max = good;
  max.replace(max.find("head_counter 5"), 14, "head_counter 18446744073709551615");
  REQUIRE(DecodeAnchor(max).ok());
  CHECK(DecodeAnchor(max)->head_counter == UINT64_MAX);
  // Repeated locations stay allowed: one anchor, many places.
  REQUIRE(DecodeAnchor(good + "location /mnt/copy\n").ok());
}

TEST_CASE("anchor store: a damaged anchor names its file and how to start afresh", "[anchor]") {
  wanbackup::testing::TempDir dir("anchor-damaged");
  const TrustAnchorStore store(dir / "security");
  REQUIRE(store
              .Update(kId,
                      [](std::optional<AnchorRecord>& r) {
                        r = Known();
                        return true;
                      })
              .ok());
  const std::string path = dir / "security/" + kId + "/anchor";
  {
    FILE* f = std::fopen(path.c_str(), "a");
    REQUIRE(f != nullptr);
    std::fputs("head_counter 0\n", f);
    std::fclose(f);
  }
  const auto loaded = store.Load(kId);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == StatusCode::kCorruption);
  CHECK(loaded.status().message().find(path) != std::string::npos);
  CHECK(loaded.status().message().find("wanbackup trust") != std::string::npos);
}
