// PacketRing: the delay line of one direction — a FIFO of packets with release times, stored
// back to back in one preallocated byte ring so the hot path never allocates. Packets are read
// from the TUN device directly into the ring (Reserve, read(), Commit) and leave in order.
// Not thread-safe: one forwarding thread both fills and drains it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wanem {

class PacketRing {
 public:
  struct Entry {
    uint32_t length;
    uint32_t reserved;
    int64_t release_ns;
    const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(this + 1); }
  };

  // `capacity` bytes of ring, allocated lazily by the kernel (mmap), so a large ring costs only
  // what is in flight.
  explicit PacketRing(size_t capacity);
  ~PacketRing();
  PacketRing(const PacketRing&) = delete;
  PacketRing& operator=(const PacketRing&) = delete;

  // Room for a packet of up to `max_length` bytes, or nullptr when the ring is full.
  uint8_t* Reserve(size_t max_length);
  // Stores the packet just written into the last Reserve()d space.
  void Commit(uint32_t length, int64_t release_ns);

  bool empty() const { return used_ == 0; }
  const Entry* Front();
  void Pop();
  size_t used_bytes() const { return used_; }
  size_t capacity() const { return capacity_; }

 private:
  static constexpr size_t kHeader = sizeof(Entry);
  static constexpr uint32_t kWrapMarker = 0xffffffffu;
  static size_t Align(size_t n) { return (n + 15) & ~size_t{15}; }
  Entry* At(size_t offset) { return reinterpret_cast<Entry*>(base_ + offset); }
  void SkipWrapAtRead();

  uint8_t* base_ = nullptr;
  size_t capacity_ = 0;
  size_t read_ = 0;
  size_t write_ = 0;
  size_t used_ = 0;  // bytes between read_ and write_, including skipped tail space
  bool wrap_pending_ = false;
};

}  // namespace wanem
