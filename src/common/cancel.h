// Process-wide cancellation request, set from a signal handler (SIGINT/SIGTERM) and polled by
// long-running loops, which then stop cleanly and return Status::Cancelled. Thread-safe and
// async-signal-safe (a lock-free atomic).
#pragma once

#include <atomic>

namespace wanbackup {

inline std::atomic<bool>& CancellationFlag() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline bool CancellationRequested() {
  return CancellationFlag().load(std::memory_order_relaxed);
}
inline void RequestCancellation() {
  CancellationFlag().store(true, std::memory_order_relaxed);
}

}  // namespace wanbackup
