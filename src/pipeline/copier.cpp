#include "pipeline/copier.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/units.h"
#include "pipeline/zero.h"

namespace wanbackup::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

constexpr uint64_t kZeroGranule = 64 << 10;
constexpr uint64_t kMinTailRequest = 256 << 10;

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

}  // namespace

namespace {

// Waits out `in_flight` submitted reads, so that none writes into a buffer after we free it.
void Drain(BlockSource& source, size_t in_flight) {
  while (in_flight > 0) {
    if (!source.Wait().ok()) return;  // a failed source writes into no buffer any more
    --in_flight;
  }
}

}  // namespace

Result<CopyResult> Copy(BlockSource& source, BlockSink& sink, const CopyOptions& options) {
  const SourceGeometry& geo = source.geometry();
  const uint64_t bs = geo.block_size;
  if (options.offset % bs != 0 || options.offset >= geo.size_bytes) {
    return Status::InvalidArgument("offset " + std::to_string(options.offset) +
                                   " is not a block boundary inside " + geo.name);
  }
  const uint64_t end = options.length == 0
                           ? geo.size_bytes
                           : std::min(geo.size_bytes, options.offset + options.length);
  if ((end - options.offset) % bs != 0) {
    return Status::InvalidArgument("length must be a multiple of the block size (" +
                                   std::to_string(bs) + " bytes)");
  }
  const uint64_t request_size = std::max<uint64_t>(
      RoundUp(options.request_size != 0 ? options.request_size : source.preferred_request_size(),
              bs),
      bs);
  const size_t max_buffers =
      std::max<size_t>(1, static_cast<size_t>(options.max_memory / request_size));
  const bool skip_zeros = options.sparse && sink.zeros_are_free();
  const bool ordered = sink.sequential_only();

  CopyResult result;
  const auto start = Clock::now();
  auto last_progress = start;
  std::vector<Buffer> all_buffers;
  std::vector<uint8_t*> free_buffers;
  std::map<uint64_t, ReadRequest> reorder;  // ordered sinks: completed, waiting for their turn
  uint64_t next = options.offset;
  uint64_t write_pos = options.offset;
  size_t in_flight = 0;

  auto take_buffer = [&]() -> uint8_t* {
    if (!free_buffers.empty()) {
      uint8_t* b = free_buffers.back();
      free_buffers.pop_back();
      return b;
    }
    if (all_buffers.size() >= max_buffers) return nullptr;
    void* p = nullptr;
    if (::posix_memalign(&p, 4096, request_size) != 0) return nullptr;
    all_buffers.emplace_back(static_cast<uint8_t*>(p));
    result.peak_buffer_bytes = all_buffers.size() * request_size;
    return static_cast<uint8_t*>(p);
  };
  auto report = [&](bool force) {
    if (!options.on_progress) return;
    const auto now = Clock::now();
    if (!force && now - last_progress < options.progress_interval) return;
    last_progress = now;
    options.on_progress(CopyProgress{write_pos - options.offset + 0, end - options.offset,
                                     now - start, source.Stats()});
  };

  // The steady part: from the first completion at or past 10 % of the bytes to the first at or
  // past 90 %.
  const uint64_t total = end - options.offset;
  const uint64_t steady_from = total / 10, steady_to = total - total / 10;
  std::optional<std::pair<Clock::time_point, uint64_t>> steady_start;
  auto note_steady = [&] {
    const uint64_t done = write_pos - options.offset;
    if (!steady_start && done >= steady_from) steady_start.emplace(Clock::now(), done);
    if (steady_start && result.steady_bytes == 0 && done >= steady_to &&
        done > steady_start->second) {
      result.steady_bytes = done - steady_start->second;
      result.steady_elapsed = Clock::now() - steady_start->first;
    }
  };

  uint64_t tail_size = 0;  // once set, the request size for the rest of the copy
  while (true) {
    // Keep the source busy: as many requests as it likes, as buffers allow.
    while (next < end && in_flight < source.preferred_in_flight()) {
      const uint64_t remaining = end - next;
      const uint64_t slots = source.preferred_in_flight();
      if (tail_size == 0 && slots > 1 && remaining < slots * request_size) {
        // The tail: spread what is left evenly over every slot, once, so that all finish
        // together instead of one connection carrying the last big request alone.
        tail_size = std::min(
            request_size, RoundUp(std::max(kMinTailRequest, (remaining + slots - 1) / slots), bs));
      }
      const uint64_t size = std::min(tail_size != 0 ? tail_size : request_size, remaining);
      uint8_t* buffer = take_buffer();
      if (buffer == nullptr) break;
      if (Status s = source.Submit(ReadRequest{next, size, buffer, 0}); !s.ok()) {
        Drain(source, in_flight);
        return s;
      }
      next += size;
      ++in_flight;
    }
    if (in_flight == 0) break;

    WB_ASSIGN_OR_RETURN(ReadCompletion done, source.Wait());
    --in_flight;
    Status status = done.status;
    const ReadRequest& r = done.request;
    if (status.ok() && ordered) {
      reorder.emplace(r.offset, r);
      while (status.ok() && !reorder.empty() && reorder.begin()->first == write_pos) {
        const ReadRequest& head = reorder.begin()->second;
        status = sink.Write(head.offset - options.offset, head.buffer, head.length);
        write_pos += head.length;
        free_buffers.push_back(head.buffer);
        reorder.erase(reorder.begin());
      }
    } else if (status.ok()) {
      status = WriteSparse(sink, r.offset - options.offset, r.buffer, r.length, skip_zeros,
                           &result.zero_bytes_skipped);
      write_pos += r.length;  // bytes done, not a position, for unordered sinks
      free_buffers.push_back(r.buffer);
    }
    if (!status.ok()) {
      Drain(source, in_flight);
      return status;
    }
    note_steady();
    report(false);
  }
  WB_RETURN_IF_ERROR(sink.Finish(total));
  result.bytes = total;
  result.elapsed = Clock::now() - start;
  result.source = source.Stats();
  report(true);
  return result;
}

}  // namespace wanbackup::pipeline
