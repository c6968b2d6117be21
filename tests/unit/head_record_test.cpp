#include "repository/head_record.h"

#include <string>

#include <catch2/catch.hpp>

using wanbackup::StatusCode;
using wanbackup::pipeline::DecodeHeadRecord;
using wanbackup::pipeline::DescribeSetDifference;
using wanbackup::pipeline::Digest;
using wanbackup::pipeline::EncodeHeadRecord;
using wanbackup::pipeline::HeadEntry;
using wanbackup::pipeline::HeadRecord;

namespace {

Digest D(uint8_t b) {
  Digest d{};
  d.fill(b);
  return d;
}

auto Decode(const std::string& text) {
  return DecodeHeadRecord(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

const std::string kHex(64, 'a');

}  // namespace

TEST_CASE("head record: what is encoded decodes to the same head", "[head]") {
  HeadRecord r;
  r.repository_id = "0123456789abcdef0123456789abcdef";
  r.counter = 7;
  r.written_unix_ms = 1764000000000;
  r.snapshots = {{1, D(1)}, {4, D(4)}, {9, D(9)}};
  auto back = Decode(EncodeHeadRecord(r));
  REQUIRE(back.ok());
  CHECK(back->repository_id == r.repository_id);
  CHECK(back->counter == 7);
  CHECK(back->written_unix_ms == r.written_unix_ms);
  CHECK(back->snapshots == r.snapshots);
}

TEST_CASE("head record: an empty snapshot set is a valid head", "[head]") {
  HeadRecord r;
  r.repository_id = "x";
  r.counter = 1;
  auto back = Decode(EncodeHeadRecord(r));
  REQUIRE(back.ok());
  CHECK(back->snapshots.empty());
}

TEST_CASE("head record: malformed heads are Corruption, never a crash", "[head]") {
  const std::string snap = R"({"id": 1, "record": ")" + kHex + R"("})";
  const auto head = [&](const std::string& counter, const std::string& snapshots) {
    return R"({"version": 1, "repository_id": "r", "counter": )" + counter +
           R"(, "written_unix_ms": 0, "snapshots": )" + snapshots + "}";
  };
  REQUIRE(Decode(head("1", "[" + snap + "]")).ok());
  const std::string twice = "[" + snap + ", " + snap + "]";
  for (const std::string& bad :
       {head("0", "[]"), head("-1", "[]"), head("1.5", "[]"), head("\"1\"", "[]"), head("1", "{}"),
        head("1", twice), head("1", R"([{"id": 0, "record": ")" + kHex + R"("}])"),
        head("1", R"([{"id": 2, "record": "abc"}])"), head("1", R"([{"id": 2}])"),
        std::string("[]"), std::string("{"), std::string(""), std::string("null")}) {
    INFO(bad);
    auto r = Decode(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kCorruption);
  }
  auto v2 = Decode(R"({"version": 2, "repository_id": "r", "counter": 1, "written_unix_ms": 0,
                       "snapshots": []})");
  REQUIRE_FALSE(v2.ok());
  CHECK(v2.status().code() == StatusCode::kUnsupported);
}

TEST_CASE("head record: snapshot ids must ascend, so a set has one encoding", "[head]") {
  const std::string text = R"({"version": 1, "repository_id": "r", "counter": 3,
      "written_unix_ms": 0, "snapshots": [{"id": 5, "record": ")" +
                           kHex + R"("}, {"id": 2, "record": ")" + kHex + R"("}]})";
  CHECK_FALSE(Decode(text).ok());
}

TEST_CASE("head record: the difference between two sets is named by its first snapshot", "[head]") {
  const std::vector<HeadEntry> head = {{1, D(1)}, {2, D(2)}, {3, D(3)}};
  CHECK(DescribeSetDifference(head, head).empty());
  CHECK(DescribeSetDifference(head, {{1, D(1)}, {2, D(2)}}) ==
        "snapshot 3 is missing from the catalog");
  CHECK(DescribeSetDifference(head, {{1, D(1)}, {3, D(3)}}) ==
        "snapshot 2 is missing from the catalog");
  CHECK(DescribeSetDifference(head, {{1, D(1)}, {2, D(2)}, {3, D(3)}, {4, D(4)}}) ==
        "the catalog lists snapshot 4, which the head does not");
  CHECK(DescribeSetDifference(head, {{1, D(1)}, {2, D(7)}, {3, D(3)}}) ==
        "snapshot 2 in the catalog is not the snapshot the head names");
  CHECK(DescribeSetDifference({}, {}).empty());
}
