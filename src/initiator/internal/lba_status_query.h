// LbaStatusQuery: asks a thin LUN which of its blocks are deallocated (GET LBA STATUS), on a
// session of its own so that it never waits behind the READs in flight on the data sessions.
// The session logs in (and proves it reaches the same device) on a helper thread from
// construction, overlapping the data sessions' start; the first question waits for it. The
// first failure or refusal of the command (ILLEGAL REQUEST, INVALID OPERATION CODE, a lost
// session) ends the questions for good: the answer is then "no information" and every block is
// read, as before.
//
// Not thread-safe: one thread (the source's consumer) asks. Owns a Connection (same rules): the
// helper thread opens it and is joined before the asking thread uses it.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
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
  // `lun` must read deallocated blocks as zeros (LunInfo::deallocated_reads_zero). Starts
  // opening the session.
  LbaStatusQuery(ConnectionOptions options, LunInfo lun);
  // Stops a login in progress and logs out.
  ~LbaStatusQuery();
  LbaStatusQuery(const LbaStatusQuery&) = delete;
  LbaStatusQuery& operator=(const LbaStatusQuery&) = delete;

  // See BlockSource::DeallocatedRanges.
  Result<std::vector<ByteRange>> Deallocated(uint64_t offset, uint64_t length);

 private:
  void Open();  // on opener_

  const ConnectionOptions options_;
  const LunInfo lun_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Connection> conn_;  // written by opener_ until it is joined
  Status gave_up_;                    // not OK after the first failure: asked no more (same)
  std::thread opener_;
};

}  // namespace wanbackup::initiator::internal
