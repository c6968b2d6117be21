#include "repository/pack_record.h"

#include <string>

namespace wanbackup::pipeline {

Result<RecordHeader> ReadRecordAt(const PackReader& pack, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer) {
  // The size comes from the catalog or a header and sizes the buffer: no record is larger
  // than kMaxRecordPayload.
  if (stored_size > kMaxRecordPayload) {
    return Status::Corruption("the catalog's record size (" + std::to_string(stored_size) +
                              ") exceeds any chunk's (" + std::to_string(kMaxRecordPayload) + ")");
  }
  // No Size() first: on object storage it is a request of its own (a HEAD) per record. A
  // record that reaches past the pack's end fails the read itself ("the pack ends before the
  // record does").
  buffer->resize(kRecordHeaderSize + stored_size);
  WB_RETURN_IF_ERROR(pack.ReadAt(offset, buffer->data(), buffer->size()));
  WB_ASSIGN_OR_RETURN(RecordHeader header, ParseRecordHeader(buffer->data()));
  if (header.stored_size != stored_size) {
    return Status::Corruption("the record's size (" + std::to_string(header.stored_size) +
                              ") differs from the catalog's (" + std::to_string(stored_size) + ")");
  }
  return header;
}

Result<RecordHeader> ReadRecordHeaderAt(const PackReader& pack, uint64_t offset,
                                        uint32_t stored_size) {
  uint8_t bytes[kRecordHeaderSize];
  WB_RETURN_IF_ERROR(pack.ReadAt(offset, bytes, sizeof bytes));
  WB_ASSIGN_OR_RETURN(RecordHeader header, ParseRecordHeader(bytes));
  if (header.stored_size != stored_size) {
    return Status::Corruption("the record's size differs from the catalog's");
  }
  return header;
}

Result<RecordHeader> ReadRecordAt(int fd, uint64_t offset, uint32_t stored_size,
                                  std::vector<uint8_t>* buffer) {
  return ReadRecordAt(FdPackReader(fd), offset, stored_size, buffer);
}

Result<RecordHeader> ReadRecordHeaderAt(int fd, uint64_t offset, uint32_t stored_size) {
  return ReadRecordHeaderAt(FdPackReader(fd), offset, stored_size);
}

}  // namespace wanbackup::pipeline
