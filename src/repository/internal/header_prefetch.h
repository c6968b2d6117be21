// Reading packs' record headers ahead, several packs at once, for the rebuild and refresh of a
// cache on object storage (rebuilder.h). Within a pack the walk is sequential by nature (the
// next record's offset is in the previous header), each read a round trip; different packs are
// independent, so worker threads walk the next packs while the rebuilder indexes the current
// one.
//
// The walk here only guesses: it follows headers that parse and fit, and stops at the first
// that does not, or at an error. The rebuilder walks each pack again exactly as before, on its
// own thread and in pack order; a read it makes at an offset read ahead (same size) is served
// from memory, any other goes to the store. So the catalog it builds, and the first error it
// meets, are those of the sequential walk whatever was read ahead; an error met here is met
// again, in order, when the rebuilder reads there itself.
//
// Thread-safety: HeaderPrefetch is made and Take()n from one thread (the rebuilder's); its
// workers only call `open` (which must be thread-safe) and the readers it returns. A
// PrefetchedReader belongs to one thread at a time: its worker's, then, once taken, the
// rebuilder's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "store/pack.h"

namespace wanbackup::pipeline::internal {

// A pack's reader that answers reads made ahead from memory, once each.
class PrefetchedReader final : public PackReader {
 public:
  explicit PrefetchedReader(std::unique_ptr<PackReader> inner) : inner_(std::move(inner)) {}
  Status ReadAt(uint64_t offset, uint8_t* data, size_t size) const override;
  Result<uint64_t> Size() const override { return inner_->Size(); }
  // Reads [offset, offset + size) from the store into `data`, kept for ReadAt.
  Status ReadAhead(uint64_t offset, uint8_t* data, size_t size);
  // Drops what was read ahead and not asked for (a walk that went another way).
  void Forget() { ahead_.clear(); }

 private:
  std::unique_ptr<PackReader> inner_;
  mutable std::map<uint64_t, std::vector<uint8_t>> ahead_;  // by offset
};

// Drops, when it goes, what `reader` read ahead and its walk did not ask for: the reader itself
// outlives the walk of its pack (the rebuilder reads map segments through it later), so without
// this those headers would stay in memory after a walk that ended early (a pack left out, an
// error). `reader` may be null (nothing was read ahead); it must outlive this.
class ForgetAhead {
 public:
  explicit ForgetAhead(PrefetchedReader* reader) : reader_(reader) {}
  ~ForgetAhead() {
    if (reader_ != nullptr) reader_->Forget();
  }
  ForgetAhead(const ForgetAhead&) = delete;
  ForgetAhead& operator=(const ForgetAhead&) = delete;

 private:
  PrefetchedReader* reader_;
};

// At most this many record headers of one pack are read ahead (the rest the rebuilder reads
// itself, in turn): each waits in memory as a map node of about 150 bytes, so the packs ahead
// hold at most window x 4096 of them (64 packs: about 40 MB), however small their records. A
// 64 MiB pack of 4 MiB chunks holds tens; one of near-empty chunks could hold 100,000.
inline constexpr size_t kMaxHeadersAhead = 4096;

class HeaderPrefetch {
 public:
  struct Job {
    std::string name;   // the pack
    uint64_t size = 0;  // its size as listed
    uint64_t from = 0;  // the offset of its first record to index
  };
  using Opener = std::function<Result<std::unique_ptr<PackReader>>(const std::string& name)>;

  // Starts `threads` workers reading `jobs` in order, at most `window` packs ahead of the last
  // one taken (what is in memory: the headers of those packs, kMaxHeadersAhead each at most).
  HeaderPrefetch(std::vector<Job> jobs, Opener open, size_t threads, size_t window);
  // Stops the workers (each after the read it is in) and waits for them.
  ~HeaderPrefetch();
  HeaderPrefetch(const HeaderPrefetch&) = delete;
  HeaderPrefetch& operator=(const HeaderPrefetch&) = delete;

  // The next job's reader, with its headers read ahead (waits for them), or the error that
  // opening the pack gave. `name` must be the next job's.
  Result<std::unique_ptr<PrefetchedReader>> Take(const std::string& name);

 private:
  void Work();
  // Opens the job's pack and walks its headers.
  Result<std::unique_ptr<PrefetchedReader>> Read(const Job& job) const;

  const std::vector<Job> jobs_;
  const Opener open_;
  const size_t window_;
  std::mutex mu_;
  std::condition_variable changed_;
  size_t next_ = 0;                // GUARDED_BY(mu_): the next job a worker starts
  size_t taken_ = 0;               // GUARDED_BY(mu_): jobs taken so far
  std::atomic<bool> stop_{false};  // read by the workers between their reads
  std::vector<std::optional<Result<std::unique_ptr<PrefetchedReader>>>> done_;  // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;
};

}  // namespace wanbackup::pipeline::internal
