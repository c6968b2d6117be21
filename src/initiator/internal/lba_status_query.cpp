#include "initiator/internal/lba_status_query.h"

#include <algorithm>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/internal/lun_query.h"

namespace wanbackup::initiator::internal {
namespace {

// 16 KiB of answer: 1023 descriptors per command.
constexpr uint32_t kAllocationLength = 16 << 10;

}  // namespace

Result<std::vector<LbaStatusDescriptor>> GetLbaStatus(Connection& conn, int lun, uint64_t lba,
                                                      uint32_t alloc_len) {
  WB_ASSIGN_OR_RETURN(ScsiTaskPtr task, conn.Execute(
                                            [=](iscsi_context* iscsi, auto cb, void* data) {
                                              return iscsi_get_lba_status_task(iscsi, lun, lba,
                                                                               alloc_len, cb, data);
                                            },
                                            "GET LBA STATUS"));
  const int size = task->datain.size;
  return ParseLbaStatus(task->datain.data, size > 0 ? static_cast<size_t>(size) : 0);
}

Result<std::vector<ByteRange>> QueryDeallocated(Connection& conn, const LunInfo& lun,
                                                uint64_t offset, uint64_t length) {
  const uint64_t bs = lun.block_size;
  if (bs == 0) return std::vector<ByteRange>{};
  const uint64_t first = (offset + bs - 1) / bs;
  const uint64_t end = std::min(lun.block_count, (offset + length) / bs);
  if (first >= end) return std::vector<ByteRange>{};
  WB_ASSIGN_OR_RETURN(std::vector<LbaExtent> extents,
                      CollectDeallocated(first, end - first, [&conn, &lun](uint64_t lba) {
                        return GetLbaStatus(conn, lun.lun, lba, kAllocationLength);
                      }));
  std::vector<ByteRange> out;
  out.reserve(extents.size());
  for (const LbaExtent& e : extents)
    out.push_back(ByteRange{e.lba * bs, e.blocks * bs});
  return out;
}

LbaStatusQuery::LbaStatusQuery(ConnectionOptions options, LunInfo lun)
    : options_(std::move(options)), lun_(std::move(lun)) {
  opener_ = std::thread([this] { Open(); });
}

LbaStatusQuery::~LbaStatusQuery() {
  stop_ = true;
  if (opener_.joinable()) opener_.join();
}

void LbaStatusQuery::Open() {
  Result<std::unique_ptr<Connection>> opened = Connection::Open(options_, &stop_);
  if (!opened.ok()) {
    gave_up_ = opened.status();
    return;
  }
  conn_ = std::move(opened).value();
  // Skipping blocks on the word of a different device would lose data: prove it is the same.
  if (Status same = VerifySameLun(*conn_, lun_, /*identity=*/true); !same.ok()) {
    gave_up_ = same;
    conn_.reset();
  }
}

Result<std::vector<ByteRange>> LbaStatusQuery::Deallocated(uint64_t offset, uint64_t length) {
  if (opener_.joinable()) opener_.join();
  if (!gave_up_.ok()) return gave_up_;
  Result<std::vector<ByteRange>> ranges = QueryDeallocated(*conn_, lun_, offset, length);
  if (!ranges.ok()) {
    gave_up_ = ranges.status();
    conn_.reset();
  }
  return ranges;
}

}  // namespace wanbackup::initiator::internal
