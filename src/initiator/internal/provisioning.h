// Logical block provisioning, decoded: the Logical Block Provisioning VPD page (0xB2) and the
// answers of GET LBA STATUS (SBC-4, SERVICE ACTION IN(16) 0x12), and the walk that covers a
// range of LBAs with as many GET LBA STATUS commands as the target's answers need. Pure
// functions on bytes, no libiscsi: unit-tested in tests/unit/provisioning_test.cpp.
//
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/result.h"

namespace wanbackup::initiator::internal {

// What the Logical Block Provisioning VPD page says (SBC-4 6.6.6).
struct LbpPage {
  bool unmap = false;               // LBPU: UNMAP is supported
  bool write_same_unmap = false;    // LBPWS: WRITE SAME(16) with the UNMAP bit is supported
  bool write_same10_unmap = false;  // LBPWS10
  uint8_t lbprz = 0;                // LBPRZ field (bits 4..2): non-zero = unmapped reads zeros
  uint8_t provisioning_type = 0;    // 0 full (or not reported), 1 resource, 2 thin
};

// Decodes the page as INQUIRY returns it (4-byte header included); nullopt when it is not that
// page or too short.
std::optional<LbpPage> ParseLbpPage(const uint8_t* data, size_t size);

// One LBA status descriptor (SBC-4 5.6.2): `blocks` from `lba` share `status`.
struct LbaStatusDescriptor {
  uint64_t lba = 0;
  uint64_t blocks = 0;
  uint8_t status = 0;  // 0 mapped (or unknown), 1 deallocated, 2 anchored
  bool operator==(const LbaStatusDescriptor&) const = default;
};
constexpr uint8_t kLbaDeallocated = 1;

// Decodes GET LBA STATUS parameter data of `size` bytes as received. The PARAMETER DATA LENGTH
// may announce more than arrived (the allocation length cut it): only whole descriptors that
// arrived count. Fails when the header is missing.
Result<std::vector<LbaStatusDescriptor>> ParseLbaStatus(const uint8_t* data, size_t size);

// A range of LBAs, [lba, lba + blocks).
struct LbaExtent {
  uint64_t lba = 0;
  uint64_t blocks = 0;
  bool operator==(const LbaExtent&) const = default;
};

// Asks the target for the descriptors from `lba` on (one GET LBA STATUS command).
using LbaStatusPager = std::function<Result<std::vector<LbaStatusDescriptor>>(uint64_t lba)>;

// The deallocated extents of [lba, lba + blocks): one command from `lba`, then from the end of
// the last descriptor each answer returned, until the range is covered, the answer is empty or
// makes no progress, or `max_commands` were sent. Descriptors are clipped to the range, merged
// when adjacent; gaps between descriptors count as mapped (read, never skipped). An error of
// any command is returned as is: the caller then knows nothing about the range.
Result<std::vector<LbaExtent>> CollectDeallocated(uint64_t lba, uint64_t blocks,
                                                  const LbaStatusPager& pager,
                                                  int max_commands = 64);

}  // namespace wanbackup::initiator::internal
