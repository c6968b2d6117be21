// IscsiSource: a BlockSource that reads one LUN over C iSCSI connections with N large READs in
// flight on each, so a long link never idles (see autotune.h for how C, N and B are chosen).
//
// Threading: one consumer thread calls the BlockSource methods. Inside, one I/O thread drives
// every connection; new connections log in on short-lived helper threads so several logins
// overlap. Submit() and Wait() hand requests across with a mutex.
//
// Robustness: each command has a timeout; BUSY/TASK SET FULL/NOT READY are retried with
// back-off, UNIT ATTENTION at once; a broken connection is torn down (cancelling its commands),
// reconnected with back-off and checked to reach the same LUN, and exactly its unfinished
// ranges are re-issued on any live connection, so nothing is lost and no buffer is written by
// two commands. Medium errors are retried twice, then the range completes with an error:
// never zero-filled. With no progress for `retry_timeout`, the source fails, naming the range
// it could not read and why.
//
// Thin LUNs: when READ CAPACITY(16) reports LBPME and LBPRZ (deallocated blocks read as zeros),
// DeallocatedRanges asks GET LBA STATUS on a session of its own (internal/lba_status_query.h),
// so callers need not read what holds no data; otherwise, or once the target refuses, it
// reports nothing deallocated.
#pragma once

#include <chrono>
#include <memory>

#include "common/block_io.h"
#include "common/result.h"
#include "initiator/autotune.h"
#include "initiator/connection_options.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator {

struct IscsiSourceOptions {
  ConnectionOptions connection;
  int lun = 0;
  TuningRequest tuning;  // user overrides (connections, queue depth, io size, memory cap)
  std::chrono::milliseconds retry_timeout{300000};
  // On a thin LUN that reads deallocated blocks as zeros, answer DeallocatedRanges with
  // GET LBA STATUS (a session of its own, opened at once). Readers that never ask — a
  // read-back that compares every byte, a rate test — turn it off and save the login.
  bool query_deallocated = true;
};

class IscsiSource : public BlockSource {
 public:
  // Logs in, checks that the LUN is a disk, measures the round trip, plans the transfer and
  // starts the I/O thread; more connections open in the background.
  static Result<std::unique_ptr<IscsiSource>> Open(IscsiSourceOptions options);

  virtual const LunInfo& lun() const = 0;
  virtual const TuningPlan& plan() const = 0;
  virtual const NegotiatedParams& negotiated() const = 0;
};

}  // namespace wanbackup::initiator
