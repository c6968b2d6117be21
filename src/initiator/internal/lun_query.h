// SCSI queries that describe a LUN: INQUIRY (standard, VPD 0x80, 0x83, 0xB0), READ CAPACITY(16)
// and REPORT LUNS. Internal to the initiator module; same threading as Connection.
#pragma once

#include <vector>

#include "common/result.h"
#include "initiator/internal/connection.h"
#include "initiator/lun_info.h"

namespace wanbackup::initiator::internal {

Result<std::vector<int>> ReportLuns(Connection& conn);
// Describes `lun`; a LUN that does not exist gives NotFound.
Result<LunInfo> QueryLun(Connection& conn, int lun);
// Confirms that `conn` reaches the LUN described by `expected`: same capacity and block size,
// and with `identity`, the same serial number and designator (after a reconnect the address may
// lead elsewhere), asked in the same batch as the capacity. A TEST UNIT READY sent with it takes
// the new session's unit attention (Connection::ExecuteAllFirst).
Status VerifySameLun(Connection& conn, const LunInfo& expected, bool identity);

}  // namespace wanbackup::initiator::internal
