#include "mount/read_ahead.h"

#include <algorithm>

namespace wanbackup::mount {

ReadAheadOptions FitToCache(ReadAheadOptions options, uint64_t cache_bytes, uint32_t chunk_size) {
  if (chunk_size == 0) return options;
  const uint64_t fits = std::max<uint64_t>(1, cache_bytes / 2 / chunk_size);
  options.max_window = static_cast<uint32_t>(std::min<uint64_t>(options.max_window, fits));
  options.initial_window = std::min(options.initial_window, options.max_window);
  return options;
}

ReadAhead::ReadAhead(uint64_t image_size, uint32_t chunk_size, const ReadAheadOptions& options)
    : chunk_count_(chunk_size == 0 ? 0 : (image_size + chunk_size - 1) / chunk_size),
      chunk_size_(chunk_size),
      options_(options) {}

std::vector<uint64_t> ReadAhead::OnRead(uint64_t offset, uint64_t size) {
  std::vector<uint64_t> ahead;
  if (size == 0 || chunk_size_ == 0) return ahead;
  const uint64_t last = (offset + size - 1) / chunk_size_;
  if (offset != end_) {  // a jump: a new run, nothing asked for yet
    run_bytes_ = 0;
    window_ = 0;
    asked_until_ = last + 1;
  } else if (window_ > 0 && last > last_chunk_) {
    window_ = std::min(options_.max_window, window_ * 2);
  }
  run_bytes_ += size;
  end_ = offset + size;
  last_chunk_ = last;
  if (run_bytes_ < options_.trigger_bytes) return ahead;
  if (window_ == 0) window_ = std::max<uint32_t>(1, options_.initial_window);
  const uint64_t until = std::min(chunk_count_, last + 1 + window_);
  for (uint64_t c = std::max(asked_until_, last + 1); c < until; ++c)
    ahead.push_back(c);
  asked_until_ = std::max(asked_until_, until);
  return ahead;
}

}  // namespace wanbackup::mount
