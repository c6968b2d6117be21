// Logical block provisioning, decoded (initiator/internal/provisioning.h): the Logical Block
// Provisioning VPD page, GET LBA STATUS answers, and the walk that pages through a range.
#include "initiator/internal/provisioning.h"

#include <cstdint>
#include <functional>

#include <catch2/catch.hpp>

#include "initiator/lun_info.h"

using wanbackup::Status;
using wanbackup::StatusCode;
using wanbackup::initiator::internal::CollectDeallocated;
using wanbackup::initiator::internal::LbaExtent;
using wanbackup::initiator::internal::LbaStatusDescriptor;
using wanbackup::initiator::internal::ParseLbaStatus;
using wanbackup::initiator::internal::ParseLbpPage;

namespace {

void PutBigEndian(std::vector<uint8_t>* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// GET LBA STATUS parameter data; `announced` descriptors in the length field (default: all).
std::vector<uint8_t> Answer(const std::vector<LbaStatusDescriptor>& descriptors,
                            size_t announced = SIZE_MAX) {
  std::vector<uint8_t> out;
  const size_t n = std::min(announced, descriptors.size());
  PutBigEndian(&out, 4 + 16 * std::max(n, announced == SIZE_MAX ? 0 : announced), 4);
  PutBigEndian(&out, 0, 4);
  for (const LbaStatusDescriptor& d : descriptors) {
    PutBigEndian(&out, d.lba, 8);
    PutBigEndian(&out, d.blocks, 4);
    out.push_back(d.status);
    PutBigEndian(&out, 0, 3);
  }
  return out;
}

// A target that answers at most `per_answer` descriptors from the requested LBA on, out of
// `map` (as an allocation length would cut it), and records where each command started.
struct PagingTarget {
  std::vector<LbaStatusDescriptor> map;
  size_t per_answer = 2;
  std::vector<uint64_t> asked;

  wanbackup::Result<std::vector<LbaStatusDescriptor>> operator()(uint64_t lba) {
    asked.push_back(lba);
    std::vector<LbaStatusDescriptor> out;
    for (const LbaStatusDescriptor& d : map) {
      if (d.lba + d.blocks <= lba || out.size() == per_answer) continue;
      LbaStatusDescriptor from = d;  // the first descriptor starts at the requested LBA
      if (from.lba < lba) {
        from.blocks -= lba - from.lba;
        from.lba = lba;
      }
      out.push_back(from);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("provisioning: tgt's page of a thin LUN lists UNMAP, WRITE SAME with UNMAP and LBPRZ",
          "[provisioning]") {
  const uint8_t page[] = {0x00, 0xB2, 0x00, 0x04, 0x00, 0xE4, 0x02, 0x00};
  auto p = ParseLbpPage(page, sizeof page);
  REQUIRE(p.has_value());
  CHECK(p->unmap);
  CHECK(p->write_same_unmap);
  CHECK(p->write_same10_unmap);
  CHECK(p->lbprz == 1);
  CHECK(p->provisioning_type == 2);
}

TEST_CASE("provisioning: a page of a fully provisioned LUN lists nothing", "[provisioning]") {
  const uint8_t page[] = {0x00, 0xB2, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00};
  auto p = ParseLbpPage(page, sizeof page);
  REQUIRE(p.has_value());
  CHECK_FALSE(p->unmap);
  CHECK_FALSE(p->write_same_unmap);
  CHECK(p->lbprz == 0);
  CHECK(p->provisioning_type == 0);
}

TEST_CASE("provisioning: another page, or one too short, is no page", "[provisioning]") {
  const uint8_t other[] = {0x00, 0xB0, 0x00, 0x04, 0x00, 0xE4, 0x02, 0x00};
  CHECK_FALSE(ParseLbpPage(other, sizeof other).has_value());
  const uint8_t short_page[] = {0x00, 0xB2, 0x00, 0x04};
  CHECK_FALSE(ParseLbpPage(short_page, sizeof short_page).has_value());
  CHECK_FALSE(ParseLbpPage(nullptr, 0).has_value());
}

TEST_CASE("provisioning: GET LBA STATUS descriptors are decoded with their status",
          "[provisioning]") {
  const std::vector<LbaStatusDescriptor> sent = {
      {0, 2048, 0}, {2048, 6144, 1}, {8192, 100, 2}, {8292, 0xFFFFFFFF, 0}};
  const std::vector<uint8_t> bytes = Answer(sent);
  auto got = ParseLbaStatus(bytes.data(), bytes.size());
  REQUIRE(got.ok());
  CHECK(*got == sent);
}

TEST_CASE("provisioning: an answer cut by the allocation length keeps its whole descriptors",
          "[provisioning]") {
  // tgt announces every descriptor to the end of the LUN and sends what fits: 2.5 of 5 here.
  const std::vector<LbaStatusDescriptor> sent = {{0, 8, 0}, {8, 8, 1}, {16, 8, 0}};
  std::vector<uint8_t> bytes = Answer(sent, 5);
  bytes.resize(8 + 16 * 2 + 8);
  auto got = ParseLbaStatus(bytes.data(), bytes.size());
  REQUIRE(got.ok());
  REQUIRE(got->size() == 2);
  CHECK((*got)[1] == LbaStatusDescriptor{8, 8, 1});
}

TEST_CASE("provisioning: an answer without its header is an error", "[provisioning]") {
  const uint8_t bytes[] = {0, 0, 0, 4};
  CHECK(ParseLbaStatus(bytes, sizeof bytes).status().code() == StatusCode::kIoError);
}

TEST_CASE("provisioning: a range is covered page by page from where each answer ended",
          "[provisioning]") {
  PagingTarget target;
  target.map = {{0, 100, 0},  {100, 50, 1},  {150, 10, 0},
                {160, 40, 1}, {200, 300, 0}, {500, 524, 1}};
  target.per_answer = 2;
  auto got = CollectDeallocated(0, 1024, std::ref(target));
  REQUIRE(got.ok());
  CHECK(*got == std::vector<LbaExtent>{{100, 50}, {160, 40}, {500, 524}});
  CHECK(target.asked == std::vector<uint64_t>{0, 150, 200});
}

TEST_CASE("provisioning: extents are clipped to the range asked and adjacent ones merged",
          "[provisioning]") {
  PagingTarget target;
  target.map = {{0, 100, 1}, {100, 50, 1}, {150, 50, 0}, {200, 800, 1}};
  target.per_answer = 10;
  auto got = CollectDeallocated(40, 200, std::ref(target));  // [40, 240)
  REQUIRE(got.ok());
  CHECK(*got == std::vector<LbaExtent>{{40, 110}, {200, 40}});
  CHECK(target.asked.size() == 1);
}

TEST_CASE("provisioning: a refused GET LBA STATUS is returned as the error, nothing assumed",
          "[provisioning]") {
  auto refused = [](uint64_t) -> wanbackup::Result<std::vector<LbaStatusDescriptor>> {
    return Status::Unsupported("GET LBA STATUS: ILLEGAL REQUEST, INVALID OPERATION CODE");
  };
  auto got = CollectDeallocated(0, 1024, refused);
  CHECK(got.status().code() == StatusCode::kUnsupported);
}

TEST_CASE("provisioning: an empty answer or one that makes no progress ends the walk",
          "[provisioning]") {
  int calls = 0;
  auto stuck = [&calls](uint64_t) -> wanbackup::Result<std::vector<LbaStatusDescriptor>> {
    ++calls;
    return std::vector<LbaStatusDescriptor>{{0, 10, 1}};  // always the same, behind us
  };
  auto got = CollectDeallocated(0, 1024, stuck);
  REQUIRE(got.ok());
  CHECK(*got == std::vector<LbaExtent>{{0, 10}});
  CHECK(calls == 2);  // the second answer brought nothing new
  auto empty = [](uint64_t) -> wanbackup::Result<std::vector<LbaStatusDescriptor>> {
    return std::vector<LbaStatusDescriptor>{};
  };
  auto none = CollectDeallocated(0, 1024, empty);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("provisioning: a gap between descriptors counts as mapped", "[provisioning]") {
  // tgt's 32-bit block counts wrap for a hole past 2^32 blocks: the next descriptor then starts
  // later than this one ends. What no descriptor covers is read, never skipped.
  PagingTarget target;
  target.map = {{0, 10, 1}, {50, 10, 1}};
  target.per_answer = 10;
  auto got = CollectDeallocated(0, 60, std::ref(target));
  REQUIRE(got.ok());
  CHECK(*got == std::vector<LbaExtent>{{0, 10}, {50, 10}});
}

TEST_CASE("provisioning: only a thin LUN whose deallocated blocks read as zeros may skip them",
          "[provisioning]") {
  // IscsiSource asks GET LBA STATUS only when this holds: with LBPRZ=0 a deallocated block's
  // content is not defined, so it is read like any other.
  wanbackup::initiator::LunInfo lun;
  CHECK_FALSE(lun.deallocated_reads_zero());
  lun.thin_provisioned = true;  // LBPME
  CHECK_FALSE(lun.deallocated_reads_zero());
  lun.unmapped_reads_zero = true;  // LBPRZ
  CHECK(lun.deallocated_reads_zero());
  lun.thin_provisioned = false;
  CHECK_FALSE(lun.deallocated_reads_zero());
}
