// LbaStatusQuery: asks a thin LUN which of its blocks are deallocated (GET LBA STATUS), on a
// session of its own so that it never waits behind the READs in flight on the data sessions.
// The session opens at the first question. The first failure or refusal of the command
// (ILLEGAL REQUEST, INVALID OPERATION CODE, a lost session) ends the questions for good: the
// answer is then "no information" and every block is read, as before.
//
// Not thread-safe: one thread (the source's consumer) asks. Owns a Connection (same rules).
#pragma once

#include <memory>
#include <vector>

#include "common/block_io.h"
#include "common/result.h"
#include "initiator/connection_options.h"
#include "initiator/internal/connection.h"
#include "initiator/internal/provisioning.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator::internal {

// One GET LBA STATUS from `lba` on `conn`, decoded; `alloc_len` bounds the answer's bytes.
Result<std::vector<LbaStatusDescriptor>> GetLbaStatus(Connection& conn, int lun, uint64_t lba,
                                                      uint32_t alloc_len);

// The deallocated byte ranges of [offset, offset + length) of `lun` on `conn` (paged).
Result<std::vector<ByteRange>> QueryDeallocated(Connection& conn, const LunInfo& lun,
                                                uint64_t offset, uint64_t length);

class LbaStatusQuery {
 public:
  // `lun` must read deallocated blocks as zeros (LunInfo::deallocated_reads_zero).
  LbaStatusQuery(ConnectionOptions options, LunInfo lun)
      : options_(std::move(options)), lun_(std::move(lun)) {}

  // See BlockSource::DeallocatedRanges.
  Result<std::vector<ByteRange>> Deallocated(uint64_t offset, uint64_t length);

 private:
  const ConnectionOptions options_;
  const LunInfo lun_;
  std::unique_ptr<Connection> conn_;
  Status gave_up_;  // not OK after the first failure: asked no more
};

}  // namespace wanbackup::initiator::internal
