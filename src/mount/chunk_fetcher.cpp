#include "mount/chunk_fetcher.h"

#include "repository/snapshot_check.h"

namespace wanbackup::mount {

ChunkFetcher::ChunkFetcher(pipeline::Repository& repo, ChunkCache& cache, int threads)
    : repo_(repo), cache_(cache) {
  for (int i = 0; i < std::max(1, threads); ++i)
    threads_.emplace_back([this] { Work(); });
}

ChunkFetcher::~ChunkFetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    t.join();
  // Nobody waits on what was never fetched (the FUSE thread has stopped), but fail it anyway.
  for (const Job& job : jobs_)
    cache_.Fail(job.ticket, Status::Cancelled("the mount is ending"));
}

void ChunkFetcher::Urgent(const ChunkRef& chunk, const ChunkCache::Ticket& ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_front({chunk, ticket});
  }
  wake_.notify_one();
}

void ChunkFetcher::Ahead(const ChunkRef& chunk, const ChunkCache::Ticket& ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({chunk, ticket});
  }
  wake_.notify_one();
}

void ChunkFetcher::Work() {
  pipeline::RecordCodec codec(repo_.keys(), 0);
  std::vector<uint8_t> record;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Fetch(codec, &record, job);
  }
}

void ChunkFetcher::Fetch(pipeline::RecordCodec& codec, std::vector<uint8_t>* record,
                         const Job& job) {
  std::vector<uint8_t> plain(job.chunk.length);
  const Status s = pipeline::LoadSealedChunk(repo_, codec, job.chunk.where, job.chunk.digest,
                                             record, plain.data());
  stored_bytes_read_ += job.chunk.where.stored_size;
  ++chunks_fetched_;
  if (s.ok()) {
    cache_.Fill(job.ticket, std::move(plain));
  } else {
    cache_.Fail(job.ticket, s);
  }
}

}  // namespace wanbackup::mount
