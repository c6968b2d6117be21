#include "initiator/iscsi_source.h"

#include "initiator/internal/iscsi_transport.h"
#include "initiator/internal/lun_open.h"
#include "initiator/internal/read_engine.h"

namespace wanbackup::initiator {

Result<std::unique_ptr<IscsiSource>> IscsiSource::Open(IscsiSourceOptions options) {
  WB_ASSIGN_OR_RETURN(internal::OpenedLun opened,
                      internal::OpenDiskLun(options.connection, options.lun, "reading"));
  const LunInfo& lun = opened.lun;
  TuningRequest tuning = options.tuning;
  tuning.rtt = opened.rtt;
  tuning.block_size = lun.block_size;
  tuning.lun_size = lun.size_bytes();
  tuning.max_transfer_bytes = uint64_t{lun.max_transfer_blocks} * lun.block_size;

  internal::ReadEngineConfig config;
  config.geometry.name = opened.name;
  config.geometry.size_bytes = lun.size_bytes();
  config.geometry.block_size = lun.block_size;
  config.negotiated = opened.conn->negotiated();
  config.rtt = opened.rtt;
  config.plan = PlanTransfer(tuning);
  config.retry_timeout = options.retry_timeout;
  config.lun = lun;
  // Only where deallocated blocks read as zeros may GET LBA STATUS stand in for reading them.
  std::unique_ptr<internal::LbaStatusQuery> lba_status;
  if (options.query_deallocated && lun.deallocated_reads_zero()) {
    lba_status = std::make_unique<internal::LbaStatusQuery>(options.connection.Clone(), lun);
  }
  auto transport = std::make_unique<internal::IscsiTransport>(
      options.connection.Clone(), std::move(opened.lun), std::move(opened.conn));
  auto engine = std::make_unique<internal::ReadEngine>(std::move(transport), std::move(config),
                                                       std::move(lba_status));
  engine->Start();
  return std::unique_ptr<IscsiSource>(std::move(engine));
}

}  // namespace wanbackup::initiator
