// What a LUN is: identity, geometry and limits, as discovered over iSCSI. Plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace wanbackup::initiator {

struct LunInfo {
  int lun = 0;
  int device_type_code = 0;  // SPC peripheral device type (0 = direct-access block device)
  std::string device_type;   // "disk", "controller", ...
  std::string vendor, product, revision;
  std::string serial;      // VPD 0x80; empty when the LUN has none
  std::string identifier;  // VPD 0x83, first designator as hex; empty when absent

  // Geometry (disks only; zero otherwise).
  uint64_t block_count = 0;
  uint32_t block_size = 0;  // logical block size in bytes
  uint32_t physical_block_size = 0;
  bool thin_provisioned = false;     // LBPME: GET LBA STATUS can tell mapped from unmapped
  bool unmapped_reads_zero = false;  // LBPRZ
  bool write_protected = false;      // MODE SENSE: the WP bit (a read-only LUN)

  // Logical Block Provisioning VPD (0xB2); all false when the LUN has no such page.
  bool has_provisioning_page = false;
  bool unmap_supported = false;             // LBPU
  bool write_same_unmap_supported = false;  // LBPWS: WRITE SAME(16) with the UNMAP bit
  bool page_unmapped_reads_zero = false;    // the page's LBPRZ
  int provisioning_type = 0;                // 0 full or not reported, 1 resource, 2 thin

  // Probe only: bytes GET LBA STATUS does not report deallocated, when it answered.
  std::optional<uint64_t> mapped_bytes;

  // Block Limits VPD (0xB0), in logical blocks; 0 means "not reported".
  uint32_t max_transfer_blocks = 0;
  uint32_t optimal_transfer_blocks = 0;
  uint64_t max_write_same_blocks = 0;  // MAXIMUM WRITE SAME LENGTH
  bool has_block_limits = false;

  bool is_disk() const { return device_type_code == 0; }
  // Deallocated blocks read as zeros, so GET LBA STATUS may stand in for reading them.
  bool deallocated_reads_zero() const { return thin_provisioned && unmapped_reads_zero; }
  uint64_t size_bytes() const { return block_count * block_size; }
};

}  // namespace wanbackup::initiator
