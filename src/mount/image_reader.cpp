#include "mount/image_reader.h"

#include <algorithm>
#include <cstring>

namespace wanbackup::mount {

ImageReader::ImageReader(pipeline::Repository& repo, const SnapshotTree& tree,
                         const ReaderOptions& options)
    : repo_(repo),
      tree_(tree),
      options_(options),
      cache_(options.cache_bytes),
      images_(tree.snapshots().size()),
      fetcher_(repo, cache_, options.fetch_threads) {}

std::unique_ptr<ReadAhead> ImageReader::NewReadAhead(size_t snapshot) const {
  const catalog::SnapshotInfo& s = tree_.snapshots().at(snapshot);
  return std::make_unique<ReadAhead>(
      s.size_bytes, s.chunk_size,
      FitToCache(options_.read_ahead, options_.cache_bytes, s.chunk_size));
}

Result<SnapshotImage*> ImageReader::Image(size_t snapshot) {
  if (!images_.at(snapshot)) {
    WB_ASSIGN_OR_RETURN(images_[snapshot], SnapshotImage::Open(repo_, tree_.snapshots()[snapshot]));
  }
  return images_[snapshot].get();
}

std::string ImageReader::RangeText(const catalog::SnapshotInfo& s, uint64_t offset,
                                   uint64_t length) const {
  const uint64_t block = std::max<uint32_t>(1, s.block_size);
  const uint64_t first = offset / block;
  const uint64_t end = (offset + length + block - 1) / block;
  return "snapshot " + std::to_string(s.id) + " bytes " + std::to_string(offset) + "+" +
         std::to_string(length) + " (LBA " + std::to_string(first) + "+" +
         std::to_string(end - first) + ")";
}

Result<size_t> ImageReader::Read(size_t snapshot, ReadAhead* ahead, uint64_t offset, size_t size,
                                 uint8_t* out) {
  const catalog::SnapshotInfo& s = tree_.snapshots().at(snapshot);
  if (offset >= s.size_bytes || size == 0) return size_t{0};
  size = static_cast<size_t>(std::min<uint64_t>(size, s.size_bytes - offset));
  Result<SnapshotImage*> image = Image(snapshot);
  Status status = image.status();
  if (status.ok()) {
    status = ReadChunks(**image, offset, size, out);
    if (ahead != nullptr && status.ok()) StartAhead(**image, ahead->OnRead(offset, size));
  }
  if (!status.ok()) {
    ++failed_reads_;
    const Status failed =
        Status(status.code(), RangeText(s, offset, size) + " cannot be read: " + status.message());
    if (options_.log) options_.log(failed.message());
    return failed;
  }
  return size;
}

Status ImageReader::ReadChunks(SnapshotImage& image, uint64_t offset, size_t size, uint8_t* out) {
  const uint32_t chunk_size = image.info().chunk_size;
  const uint64_t first = offset / chunk_size, last = (offset + size - 1) / chunk_size;
  std::vector<ChunkRef> refs;
  std::vector<ChunkCache::Ticket> tickets;
  for (uint64_t c = first; c <= last; ++c) {  // every fetch starts before any wait
    WB_ASSIGN_OR_RETURN(ChunkRef ref, image.Locate(c));
    ChunkCache::Ticket ticket;
    if (!ref.zero) {
      ticket = cache_.Get(ref.digest);
      if (ticket.fetch) fetcher_.Urgent(ref, ticket);
    }
    refs.push_back(ref);
    tickets.push_back(std::move(ticket));
  }
  for (size_t k = 0; k < refs.size(); ++k) {
    const ChunkRef& ref = refs[k];
    const uint64_t from = std::max(offset, ref.offset);
    const uint64_t to = std::min(offset + size, ref.offset + ref.length);
    uint8_t* dst = out + (from - offset);
    if (ref.zero) {
      ++zero_chunk_reads_;
      std::memset(dst, 0, to - from);
      continue;
    }
    WB_ASSIGN_OR_RETURN(ChunkData data, cache_.Wait(tickets[k]));
    if (data->size() != ref.length) return Status::Corruption("a chunk of the wrong size");
    std::memcpy(dst, data->data() + (from - ref.offset), to - from);
  }
  return Status::Ok();
}

void ImageReader::StartAhead(SnapshotImage& image, const std::vector<uint64_t>& chunks) {
  for (uint64_t c : chunks) {
    Result<ChunkRef> ref = image.Locate(c);
    if (!ref.ok() || ref->zero) continue;  // a read of it will report the failure
    ChunkCache::Ticket ticket = cache_.Get(ref->digest);
    if (ticket.fetch) fetcher_.Ahead(*ref, ticket);
  }
}

ReaderStats ImageReader::stats() const {
  ReaderStats s;
  s.stored_bytes_read = fetcher_.stored_bytes_read();
  s.chunks_fetched = fetcher_.chunks_fetched();
  s.zero_chunk_reads = zero_chunk_reads_;
  s.failed_reads = failed_reads_;
  s.cache = cache_.stats();
  return s;
}

}  // namespace wanbackup::mount
