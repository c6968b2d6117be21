#include "packet_ring.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace wanem {

static_assert(sizeof(PacketRing::Entry) == 16, "ring records assume a 16-byte header");

PacketRing::PacketRing(size_t capacity) : capacity_(Align(capacity)) {
  void* p = ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<uint8_t*>(p);
}

PacketRing::~PacketRing() {
  ::munmap(base_, capacity_);
}

uint8_t* PacketRing::Reserve(size_t max_length) {
  const size_t need = kHeader + Align(max_length);
  wrap_pending_ = false;
  if (used_ == 0) read_ = write_ = 0;
  if (used_ != 0 && write_ == read_) return nullptr;  // exactly full
  if (write_ >= read_) {
    // Free space: [write_, capacity_) and then [0, read_).
    if (capacity_ - write_ >= need) return reinterpret_cast<uint8_t*>(At(write_) + 1);
    if (read_ > need) {  // strictly more, so write_ never catches up with read_ exactly
      wrap_pending_ = true;
      return reinterpret_cast<uint8_t*>(At(0) + 1);
    }
    return nullptr;
  }
  // Free space: [write_, read_).
  if (read_ - write_ > need) return reinterpret_cast<uint8_t*>(At(write_) + 1);
  return nullptr;
}

void PacketRing::Commit(uint32_t length, int64_t release_ns) {
  if (wrap_pending_) {
    if (capacity_ - write_ >= kHeader) At(write_)->length = kWrapMarker;
    used_ += capacity_ - write_;
    write_ = 0;
    wrap_pending_ = false;
  }
  Entry* e = At(write_);
  e->length = length;
  e->reserved = 0;
  e->release_ns = release_ns;
  const size_t size = kHeader + Align(length);
  write_ += size;
  used_ += size;
  if (write_ == capacity_) write_ = 0;
}

void PacketRing::SkipWrapAtRead() {
  if (capacity_ - read_ < kHeader || At(read_)->length == kWrapMarker) {
    used_ -= capacity_ - read_;
    read_ = 0;
  }
}

const PacketRing::Entry* PacketRing::Front() {
  if (used_ == 0) return nullptr;
  SkipWrapAtRead();
  return At(read_);
}

void PacketRing::Pop() {
  SkipWrapAtRead();
  const size_t size = kHeader + Align(At(read_)->length);
  read_ += size;
  used_ -= size;
  if (read_ == capacity_) read_ = 0;
}

}  // namespace wanem
