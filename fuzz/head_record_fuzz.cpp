// Head records (repository/head_record.h). A head that decodes must encode and decode to the same
// head.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "repository/head_record.h"

using namespace wanbackup::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto head = DecodeHeadRecord(data, size);
  if (!head.ok()) return 0;
  const std::string again = EncodeHeadRecord(*head);
  auto decoded = DecodeHeadRecord(reinterpret_cast<const uint8_t*>(again.data()), again.size());
  if (!decoded.ok() || decoded->counter != head->counter || decoded->snapshots != head->snapshots ||
      decoded->repository_id != head->repository_id) {
    std::abort();
  }
  (void)DescribeSetDifference(head->snapshots, decoded->snapshots);
  return 0;
}
