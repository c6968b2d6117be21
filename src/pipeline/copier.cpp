#include "pipeline/copier.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/units.h"
#include "pipeline/deallocation.h"
#include "pipeline/zero.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

using Buffer = MallocBuffer;

constexpr uint64_t kZeroGranule = 64 << 10;
constexpr uint64_t kMinTailRequest = 256 << 10;
// The copier asks the source about deallocated ranges this many requests ahead at first.
constexpr uint64_t kDeallocationWindowRequests = 256;

uint64_t RoundUp(uint64_t v, uint64_t m) {
  return (v + m - 1) / m * m;
}

// Writes `data` at `offset`, skipping all-zero granules when holes are free.
Status WriteSparse(BlockSink& sink, uint64_t offset, const uint8_t* data, uint64_t length,
                   bool skip_zeros, uint64_t* skipped) {
  if (!skip_zeros) return sink.Write(offset, data, length);
  uint64_t run_start = 0;
  bool in_run = false;
  for (uint64_t pos = 0; pos < length; pos += kZeroGranule) {
    const uint64_t n = std::min(kZeroGranule, length - pos);
    const bool zero = IsAllZero(data + pos, n);
    if (zero) {
      *skipped += n;
      if (in_run) {
        WB_RETURN_IF_ERROR(sink.Write(offset + run_start, data + run_start, pos - run_start));
        in_run = false;
      }
    } else if (!in_run) {
      run_start = pos;
      in_run = true;
    }
  }
  if (in_run)
    WB_RETURN_IF_ERROR(sink.Write(offset + run_start, data + run_start, length - run_start));
  return Status::Ok();
}

// Waits out `in_flight` submitted reads, so that none writes into a buffer after we free it.
void Drain(BlockSource& source, size_t in_flight) {
  while (in_flight > 0) {
    if (!source.Wait().ok()) return;  // a failed source writes into no buffer any more
    --in_flight;
  }
}

// What a copy will do, checked against the source before anything is submitted.
struct CopyPlan {
  uint64_t begin = 0;  // in the source
  uint64_t end = 0;
  uint64_t block_size = 0;
  uint64_t request_size = 0;
  size_t max_buffers = 0;
  bool skip_zeros = false;
  bool ordered = false;
  uint64_t total() const { return end - begin; }
};

Result<CopyPlan> PlanCopy(BlockSource& source, BlockSink& sink, const CopyOptions& options) {
  const SourceGeometry& geo = source.geometry();
  CopyPlan plan;
  plan.block_size = geo.block_size;
  const uint64_t bs = plan.block_size;
  if (options.offset % bs != 0 || options.offset >= geo.size_bytes) {
    return Status::InvalidArgument("offset " + std::to_string(options.offset) +
                                   " is not a block boundary inside " + geo.name);
  }
  plan.begin = options.offset;
  plan.end = options.length == 0 ? geo.size_bytes
                                 : std::min(geo.size_bytes, options.offset + options.length);
  if (plan.total() % bs != 0) {
    return Status::InvalidArgument("length must be a multiple of the block size (" +
                                   std::to_string(bs) + " bytes)");
  }
  plan.request_size = std::max<uint64_t>(
      RoundUp(options.request_size != 0 ? options.request_size : source.preferred_request_size(),
              bs),
      bs);
  plan.max_buffers =
      std::max<size_t>(1, static_cast<size_t>(options.max_memory / plan.request_size));
  plan.skip_zeros = options.sparse && sink.zeros_are_free();
  plan.ordered = sink.sequential_only();
  return plan;
}

// Aligned request buffers, allocated on first use up to a limit and reused.
class Buffers {
 public:
  Buffers(size_t max_count, uint64_t size) : max_count_(max_count), size_(size) {}
  // A free buffer, or null when the limit is reached (or memory is short).
  uint8_t* Take() {
    if (!free_.empty()) {
      uint8_t* b = free_.back();
      free_.pop_back();
      return b;
    }
    if (all_.size() >= max_count_) return nullptr;
    void* p = nullptr;
    if (::posix_memalign(&p, kBufferAlignment, size_) != 0) return nullptr;
    all_.emplace_back(static_cast<uint8_t*>(p));
    return static_cast<uint8_t*>(p);
  }
  void Put(uint8_t* b) { free_.push_back(b); }
  uint64_t allocated_bytes() const { return all_.size() * size_; }

 private:
  static constexpr size_t kBufferAlignment = 4096;  // O_DIRECT sinks and sources need it
  const size_t max_count_;
  const uint64_t size_;
  std::vector<Buffer> all_;
  std::vector<uint8_t*> free_;
};

// The steady part of a copy: from the first completion at or past 10 % of the bytes to the
// first at or past 90 %.
class SteadyMeter {
 public:
  explicit SteadyMeter(uint64_t total) : from_(total / 10), to_(total - total / 10) {}
  void Note(uint64_t done, CopyResult* result) {
    if (!start_ && done >= from_) start_.emplace(Clock::now(), done);
    if (start_ && result->steady_bytes == 0 && done >= to_ && done > start_->second) {
      result->steady_bytes = done - start_->second;
      result->steady_elapsed = Clock::now() - start_->first;
    }
  }

 private:
  const uint64_t from_, to_;
  std::optional<std::pair<Clock::time_point, uint64_t>> start_;
};

// One copy, run on the calling thread: keeps the source busy, writes what completes.
class CopyRun {
 public:
  CopyRun(BlockSource& source, BlockSink& sink, const CopyOptions& options, const CopyPlan& plan)
      : source_(source),
        sink_(sink),
        options_(options),
        plan_(plan),
        buffers_(plan.max_buffers, plan.request_size),
        steady_(plan.total()),
        deallocated_(source, plan.begin, plan.end, kDeallocationWindowRequests * plan.request_size),
        next_(plan.begin),
        write_pos_(plan.begin) {}

  Result<CopyResult> Run() {
    while (true) {
      if (Status s = Submit(); !s.ok()) {
        Drain(source_, in_flight_);
        return s;
      }
      if (in_flight_ == 0) break;
      WB_ASSIGN_OR_RETURN(ReadCompletion done, source_.Wait());
      --in_flight_;
      if (Status s = Complete(done); !s.ok()) {
        Drain(source_, in_flight_);
        return s;
      }
      steady_.Note(write_pos_ - plan_.begin, &result_);
      Report(false);
    }
    WB_RETURN_IF_ERROR(sink_.Finish(plan_.total()));
    result_.bytes = plan_.total();
    result_.elapsed = Clock::now() - start_;
    result_.source = source_.Stats();
    Report(true);
    return result_;
  }

 private:
  // The size of the next request. Near the end, what is left is spread evenly over every
  // slot, once, so that all finish together instead of one connection carrying the last big
  // request alone.
  uint64_t NextRequestSize() {
    const uint64_t remaining = plan_.end - next_;
    const uint64_t slots = source_.preferred_in_flight();
    if (tail_size_ == 0 && slots > 1 && remaining < slots * plan_.request_size) {
      tail_size_ = std::min(
          plan_.request_size,
          RoundUp(std::max(kMinTailRequest, (remaining + slots - 1) / slots), plan_.block_size));
    }
    return std::min(tail_size_ != 0 ? tail_size_ : plan_.request_size, remaining);
  }

  // Keeps the source busy: as many requests as it likes, as buffers allow. A request stops
  // where a deallocated range starts; a deallocated range is not read but written as zeros.
  Status Submit() {
    while (next_ < plan_.end && in_flight_ < source_.preferred_in_flight()) {
      const RangeClass range = deallocated_.Classify(next_, NextRequestSize());
      if (range.deallocated && plan_.skip_zeros && !plan_.ordered) {
        result_.bytes_deallocated += range.length;  // the sink reads zeros there already
        result_.zero_bytes_skipped += range.length;
        next_ += range.length;
        write_pos_ += range.length;
        continue;
      }
      uint8_t* buffer = buffers_.Take();
      if (buffer == nullptr) break;
      result_.peak_buffer_bytes = buffers_.allocated_bytes();
      const ReadRequest request{next_, range.length, buffer, 0};
      next_ += range.length;
      if (range.deallocated) {
        result_.bytes_deallocated += range.length;
        std::fill_n(buffer, range.length, uint8_t{0});
        WB_RETURN_IF_ERROR(Complete(ReadCompletion{request, Status::Ok()}));
        continue;
      }
      WB_RETURN_IF_ERROR(source_.Submit(request));
      ++in_flight_;
    }
    return Status::Ok();
  }

  // Writes a completed read: at once for positioned sinks, in order for sequential ones.
  Status Complete(const ReadCompletion& done) {
    WB_RETURN_IF_ERROR(done.status);
    const ReadRequest& r = done.request;
    if (!plan_.ordered) {
      Status status = WriteSparse(sink_, r.offset - plan_.begin, r.buffer, r.length,
                                  plan_.skip_zeros, &result_.zero_bytes_skipped);
      write_pos_ += r.length;  // bytes done, not a position, for unordered sinks
      buffers_.Put(r.buffer);
      return status;
    }
    reorder_.emplace(r.offset, r);
    while (!reorder_.empty() && reorder_.begin()->first == write_pos_) {
      const ReadRequest& head = reorder_.begin()->second;
      Status status = sink_.Write(head.offset - plan_.begin, head.buffer, head.length);
      write_pos_ += head.length;
      buffers_.Put(head.buffer);
      reorder_.erase(reorder_.begin());
      WB_RETURN_IF_ERROR(status);
    }
    return Status::Ok();
  }

  void Report(bool force) {
    if (!options_.on_progress) return;
    const auto now = Clock::now();
    if (!force && now - last_progress_ < options_.progress_interval) return;
    last_progress_ = now;
    options_.on_progress(
        CopyProgress{write_pos_ - plan_.begin, plan_.total(), now - start_, source_.Stats()});
  }

  BlockSource& source_;
  BlockSink& sink_;
  const CopyOptions& options_;
  const CopyPlan plan_;
  Buffers buffers_;
  SteadyMeter steady_;
  DeallocationLookahead deallocated_;
  CopyResult result_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_progress_ = start_;
  std::map<uint64_t, ReadRequest> reorder_;  // ordered sinks: completed, waiting for their turn
  uint64_t next_;                            // the next offset to submit
  uint64_t write_pos_;
  size_t in_flight_ = 0;
  uint64_t tail_size_ = 0;  // once set, the request size for the rest of the copy
};

}  // namespace

Result<CopyResult> Copy(BlockSource& source, BlockSink& sink, const CopyOptions& options) {
  WB_ASSIGN_OR_RETURN(const CopyPlan plan, PlanCopy(source, sink, options));
  return CopyRun(source, sink, options, plan).Run();
}

}  // namespace wanbackup::pipeline
