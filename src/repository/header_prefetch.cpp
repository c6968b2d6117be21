#include "repository/internal/header_prefetch.h"

#include <cstring>
#include <utility>

#include "repository/record.h"

namespace wanbackup::pipeline::internal {

Status PrefetchedReader::ReadAt(uint64_t offset, uint8_t* data, size_t size) const {
  auto it = ahead_.find(offset);
  if (it == ahead_.end() || it->second.size() != size) return inner_->ReadAt(offset, data, size);
  std::memcpy(data, it->second.data(), size);
  ahead_.erase(it);  // each is asked for once: what stays is what the walk did not want
  return Status::Ok();
}

Status PrefetchedReader::ReadAhead(uint64_t offset, uint8_t* data, size_t size) {
  WB_RETURN_IF_ERROR(inner_->ReadAt(offset, data, size));
  ahead_[offset].assign(data, data + size);
  return Status::Ok();
}

HeaderPrefetch::HeaderPrefetch(std::vector<Job> jobs, Opener open, size_t threads, size_t window)
    : jobs_(std::move(jobs)), open_(std::move(open)), window_(window), done_(jobs_.size()) {
  for (size_t t = 0; t < threads && t < jobs_.size(); ++t)
    workers_.emplace_back([this] { Work(); });
}

HeaderPrefetch::~HeaderPrefetch() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_)
    t.join();
}

void HeaderPrefetch::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || next_ >= jobs_.size() || next_ < taken_ + window_; });
    if (stop_ || next_ >= jobs_.size()) return;
    const size_t i = next_++;
    lock.unlock();
    Result<std::unique_ptr<PrefetchedReader>> read = Read(jobs_[i]);
    lock.lock();
    done_[i].emplace(std::move(read));
    changed_.notify_all();
  }
}

Result<std::unique_ptr<PrefetchedReader>> HeaderPrefetch::Read(const Job& job) const {
  WB_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> opened, open_(job.name));
  auto reader = std::make_unique<PrefetchedReader>(std::move(opened));
  // The pack's header (CheckPackHeader's read), then each record's, as long as they lead on.
  uint8_t pack_header[kPackHeaderSize];
  if (!reader->ReadAhead(0, pack_header, sizeof pack_header).ok()) return reader;
  uint64_t offset = job.from;
  size_t headers = 0;
  while (!stop_ && headers++ < kMaxHeadersAhead && offset + kRecordHeaderSize <= job.size) {
    uint8_t bytes[kRecordHeaderSize];
    if (!reader->ReadAhead(offset, bytes, sizeof bytes).ok()) break;
    Result<RecordHeader> h = ParseRecordHeader(bytes);
    if (!h.ok() || offset + kRecordHeaderSize + h->stored_size > job.size) break;
    offset += kRecordHeaderSize + h->stored_size;
  }
  return reader;
}

Result<std::unique_ptr<PrefetchedReader>> HeaderPrefetch::Take(const std::string& name) {
  std::unique_lock<std::mutex> lock(mu_);
  const size_t i = taken_;
  if (i >= jobs_.size() || jobs_[i].name != name) {
    return Status::Internal("pack " + name + " taken out of order");
  }
  changed_.wait(lock, [&] { return done_[i].has_value(); });
  Result<std::unique_ptr<PrefetchedReader>> read = std::move(*done_[i]);
  done_[i].reset();
  ++taken_;
  changed_.notify_all();
  return read;
}

}  // namespace wanbackup::pipeline::internal
