// WorkQueue: a closable multi-producer multi-consumer FIFO; BufferPool: a fixed set of aligned
// buffers handed out and returned; SlotCounter: a closable counting semaphore. All thread-safe;
// they are how the pipeline's stages pass work and how its memory stays bounded (a producer
// waits for a free buffer or slot). Each wakes every waiter when closed, so that a stage that
// stops early leaves no thread blocked.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace wanbackup::pipeline {

template <typename T>
class WorkQueue {
 public:
  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // Blocks until an item is there or the queue is closed and empty (nullopt).
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return Ready(); });
    return TakeFront();
  }
  // As Pop, but waits at most `wait`: nullopt with *timed_out set when nothing came.
  std::optional<T> PopFor(std::chrono::nanoseconds wait, bool* timed_out) {
    std::unique_lock<std::mutex> lock(mu_);
    *timed_out = !cv_.wait_for(lock, wait, [this] { return Ready(); });
    return TakeFront();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  bool Ready() const { return !items_.empty() || closed_; }  // REQUIRES: mu_ held
  std::optional<T> TakeFront() {                             // REQUIRES: mu_ held
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;  // GUARDED_BY(mu_)
  bool closed_ = false;  // GUARDED_BY(mu_)
};

class BufferPool {
 public:
  BufferPool(size_t count, size_t size) : size_(size) {
    for (size_t i = 0; i < count; ++i) {
      void* p = nullptr;
      if (::posix_memalign(&p, 4096, size) != 0) break;
      owned_.emplace_back(static_cast<uint8_t*>(p));
      free_.push_back(static_cast<uint8_t*>(p));
    }
  }
  size_t count() const { return owned_.size(); }
  size_t buffer_size() const { return size_; }
  // A free buffer, or null when none is free right now.
  uint8_t* TryTake() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return nullptr;
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  // Waits for a free buffer; null once Close()d.
  uint8_t* Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !free_.empty() || closed_; });
    if (free_.empty()) return nullptr;
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  void Put(uint8_t* b) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(b);
    }
    cv_.notify_one();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  const size_t size_;
  std::vector<std::unique_ptr<uint8_t, Free>> owned_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> free_;  // GUARDED_BY(mu_)
  bool closed_ = false;         // GUARDED_BY(mu_)
};

class SlotCounter {
 public:
  // Makes `n` more slots free.
  void Release(int n = 1) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_ += n;
    }
    if (n == 1) {
      cv_.notify_one();
    } else {
      cv_.notify_all();
    }
  }
  // Waits for a free slot and takes it; false once Close()d (even with slots free: the
  // pipeline is stopping, and whoever asked has nothing left to do).
  bool Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return free_ > 0 || closed_; });
    if (closed_) return false;
    --free_;
    return true;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_ = 0;         // GUARDED_BY(mu_)
  bool closed_ = false;  // GUARDED_BY(mu_)
};

}  // namespace wanbackup::pipeline
