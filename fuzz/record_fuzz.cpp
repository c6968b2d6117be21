// Record parser: a header, then RecordCodec::Open of the payload under fixed keys, encrypted and
// not (repository/record.h).
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_keys.h"
#include "repository/record.h"

using namespace wanbackup::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = InitCrypto().ok();
  static RecordCodec encrypted(wanbackup::fuzz::EncryptedKeys(), 3);
  static RecordCodec plain(KeySet::Unencrypted(wanbackup::fuzz::kRepositoryId), 3);
  if (!init || size < kRecordHeaderSize) return 0;
  auto header = ParseRecordHeader(data);
  if (!header.ok() || header->stored_size != size - kRecordHeaderSize) return 0;
  if (header->raw_size > (64u << 20)) return 0;  // what a repository's chunk size allows
  std::vector<uint8_t> out(header->raw_size);
  (void)encrypted.Open(*header, data + kRecordHeaderSize, out.data());
  (void)plain.Open(*header, data + kRecordHeaderSize, out.data());
  return 0;
}
