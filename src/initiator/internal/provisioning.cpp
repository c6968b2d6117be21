#include "initiator/internal/provisioning.h"

#include <algorithm>
#include <string>

namespace wanbackup::initiator::internal {
namespace {

constexpr uint8_t kLbpPageCode = 0xB2;
constexpr size_t kLbaStatusHeader = 8;
constexpr size_t kLbaStatusDescriptorSize = 16;

uint64_t BigEndian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::optional<LbpPage> ParseLbpPage(const uint8_t* data, size_t size) {
  // Header (device type, page code, page length) and bytes 4..7: threshold exponent, the flags,
  // the provisioning type, reserved.
  if (data == nullptr || size < 7 || data[1] != kLbpPageCode) return std::nullopt;
  LbpPage page;
  const uint8_t flags = data[5];
  page.unmap = (flags & 0x80) != 0;
  page.write_same_unmap = (flags & 0x40) != 0;
  page.write_same10_unmap = (flags & 0x20) != 0;
  page.lbprz = static_cast<uint8_t>((flags >> 2) & 0x07);
  page.provisioning_type = static_cast<uint8_t>(data[6] & 0x07);
  return page;
}

Result<std::vector<LbaStatusDescriptor>> ParseLbaStatus(const uint8_t* data, size_t size) {
  if (data == nullptr || size < kLbaStatusHeader) {
    return Status::IoError("GET LBA STATUS: an answer of " + std::to_string(size) +
                           " bytes has no header");
  }
  // PARAMETER DATA LENGTH counts the bytes after itself (from byte 4).
  const uint64_t announced = BigEndian(data, 4) + 4;
  const size_t usable = static_cast<size_t>(std::min<uint64_t>(size, announced));
  std::vector<LbaStatusDescriptor> out;
  for (size_t at = kLbaStatusHeader; at + kLbaStatusDescriptorSize <= usable;
       at += kLbaStatusDescriptorSize) {
    LbaStatusDescriptor d;
    d.lba = BigEndian(data + at, 8);
    d.blocks = BigEndian(data + at + 8, 4);
    d.status = static_cast<uint8_t>(data[at + 12] & 0x0F);
    out.push_back(d);
  }
  return out;
}

Result<std::vector<LbaExtent>> CollectDeallocated(uint64_t lba, uint64_t blocks,
                                                  const LbaStatusPager& pager, int max_commands) {
  const uint64_t end = lba + blocks;
  std::vector<LbaExtent> out;
  uint64_t next = lba;
  for (int command = 0; next < end && command < max_commands; ++command) {
    WB_ASSIGN_OR_RETURN(std::vector<LbaStatusDescriptor> page, pager(next));
    uint64_t reached = next;
    for (const LbaStatusDescriptor& d : page) {
      const uint64_t d_end = d.lba + d.blocks;
      reached = std::max(reached, std::min(d_end, end));
      if (d.status != kLbaDeallocated) continue;
      const uint64_t from = std::max(d.lba, next);
      const uint64_t to = std::min(d_end, end);
      if (from >= to) continue;
      if (!out.empty() && out.back().lba + out.back().blocks == from) {
        out.back().blocks += to - from;
      } else if (out.empty() || out.back().lba + out.back().blocks < from) {
        out.push_back(LbaExtent{from, to - from});
      }
    }
    if (reached <= next) break;  // nothing new: stop rather than ask the same again
    next = reached;
  }
  return out;
}

}  // namespace wanbackup::initiator::internal
