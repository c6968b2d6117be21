// catalog-scale: the SQLite catalog at the size the design promises — a 16 TiB LUN in 4 MiB
// chunks (4 Mi chunk map entries) with 100 snapshots — built synthetically through the same
// Catalog API the snapshot pipeline uses, timing each kind of work and the file's size.
//
// Snapshot 1 stores every non-zero chunk (a quarter of the LUN is zero, in 256 MiB extents);
// each later snapshot rewrites --change of the chunks at uniformly random places (new chunks)
// and repeats the rest — the worst case for the map encoding, since after 100 such nights 63 %
// of the map differs from the first snapshot's sequential ids. Chunks
// are committed in transactions of --batch chunks (a real run commits every checkpoint; this
// measures the catalog's own cost per chunk, not the disk's fsync rate). Dedup lookups
// (FindChunk) run for every chunk of the first and the last snapshot.
//   catalog-scale [--dir DIR] [--chunks 4194304] [--snapshots 100] [--change 0.01]
//                 [--batch 4096] [--keep]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace {

using wanbackup::Status;
using wanbackup::catalog::Catalog;
using wanbackup::catalog::ChunkRecord;
using wanbackup::catalog::Digest;
using wanbackup::catalog::SnapshotInfo;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kChunkSize = 4u << 20;
constexpr uint64_t kChunksPerPack = 64;  // 256 MiB packs at 4 MiB chunks

struct Options {
  std::string dir = "/tmp/wanbackup-catalog-scale";
  uint64_t chunks = 4194304;
  int snapshots = 100;
  double change = 0.01;
  uint64_t batch = 4096;
  bool keep = false;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "catalog-scale: error: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

uint64_t PeakRssMiB() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) / 1024;
}

uint64_t FileBytes(const std::string& path) {
  uint64_t total = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path + suffix, ec);
    if (!ec) total += n;
  }
  return total;
}

class Builder {
 public:
  Builder(Catalog* catalog, uint64_t batch) : catalog_(catalog), batch_(batch) {}

  // Adds a chunk with a fresh random digest; returns its id.
  int64_t NewChunk() {
    if (in_pack_ == kChunksPerPack || pack_ == 0) {
      auto pack = catalog_->AddPack("bench-" + std::to_string(++packs_));
      if (!pack.ok()) Die("AddPack: " + pack.status().ToString());
      pack_ = *pack;
      in_pack_ = 0;
    }
    ChunkRecord c;
    for (auto& b : c.digest)
      b = static_cast<uint8_t>(rng_());
    c.pack_id = pack_;
    c.offset = in_pack_ * (kChunkSize / 2);
    c.stored_size = kChunkSize / 2;
    c.raw_size = kChunkSize;
    ++in_pack_;
    auto id = catalog_->AddChunk(c);
    if (!id.ok()) Die("AddChunk: " + id.status().ToString());
    last_digests_.push_back(c.digest);
    if (++pending_ == batch_) Commit();
    return *id;
  }

  void Begin() {
    auto tx = catalog_->Begin();
    if (!tx.ok()) Die("Begin: " + tx.status().ToString());
    tx_ = std::move(*tx);
  }
  void Commit() {
    Check(tx_->Commit(), "Commit");
    pending_ = 0;
    Begin();
  }
  void Finish() {
    Check(tx_->Commit(), "Commit");
    tx_.reset();
  }
  std::mt19937_64& rng() { return rng_; }
  const std::vector<Digest>& digests() const { return last_digests_; }

 private:
  Catalog* catalog_;
  uint64_t batch_;
  std::unique_ptr<Catalog::Transaction> tx_;
  std::mt19937_64 rng_{42};
  int64_t pack_ = 0;
  uint64_t in_pack_ = 0;
  uint64_t packs_ = 0;
  uint64_t pending_ = 0;
  std::vector<Digest> last_digests_;
};

int64_t StartSnapshot(Catalog* catalog, uint64_t chunks, int n) {
  SnapshotInfo info;
  info.source = "iscsi://bench/iqn.2026-11.org.wanbackup:scale/1";
  info.tag = "night-" + std::to_string(n);
  info.size_bytes = chunks * kChunkSize;
  info.block_size = 512;
  info.chunk_size = kChunkSize;
  info.started_unix_ms = 1'790'000'000'000 + n * 86'400'000LL;
  auto id = catalog->BeginSnapshot(info);
  if (!id.ok()) Die("BeginSnapshot: " + id.status().ToString());
  return *id;
}

void WriteMap(Catalog* catalog, Builder& b, int64_t snap, const std::vector<int64_t>& map,
              uint64_t chunks, int n) {
  for (uint64_t first = 0; first < map.size(); first += wanbackup::catalog::kMapSegmentChunks) {
    const uint64_t end =
        std::min<uint64_t>(map.size(), first + wanbackup::catalog::kMapSegmentChunks);
    std::vector<int64_t> seg(map.begin() + static_cast<long>(first),
                             map.begin() + static_cast<long>(end));
    Check(catalog->PutMapSegment(snap, first, seg), "PutMapSegment");
  }
  SnapshotInfo info;
  info.id = snap;
  info.size_bytes = chunks * kChunkSize;
  info.block_size = 512;
  info.chunk_size = kChunkSize;
  info.finished_unix_ms = 1'790'000'000'000 + n * 86'400'000LL + 3'600'000;
  info.status = wanbackup::catalog::SnapshotStatus::kComplete;
  info.bytes_read = info.size_bytes;
  info.chunks_total = chunks;
  Check(catalog->FinishSnapshot(info), "FinishSnapshot");
  b.Commit();
}

double LookupAll(Catalog* catalog, const std::vector<Digest>& digests, uint64_t* misses) {
  const auto t = Clock::now();
  *misses = 0;
  for (const auto& d : digests) {
    auto r = catalog->FindChunk(d);
    if (!r.ok()) Die("FindChunk: " + r.status().ToString());
    if (!r->has_value()) ++*misses;
  }
  return Seconds(t);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--dir") {
      o.dir = value();
    } else if (a == "--chunks") {
      o.chunks = std::stoull(value());
    } else if (a == "--snapshots") {
      o.snapshots = std::stoi(value());
    } else if (a == "--change") {
      o.change = std::stod(value());
    } else if (a == "--batch") {
      o.batch = std::stoull(value());
    } else if (a == "--keep") {
      o.keep = true;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: catalog-scale [--dir DIR] [--chunks 4194304] [--snapshots 100] "
          "[--change 0.01] [--batch 4096] [--keep]\n");
      std::exit(0);
    } else {
      Die("unknown argument '" + a + "'");
    }
  }
  if (o.chunks == 0 || o.snapshots < 1 || o.change < 0 || o.change > 1 || o.batch == 0) {
    Die("--chunks, --snapshots and --batch must be positive, --change within 0..1");
  }
  return o;
}

// The benchmark's state between its phases.
struct Bench {
  const Options& o;
  Catalog* catalog;
  Builder& b;
  std::string path;
  std::vector<int64_t> map;  // the latest snapshot's chunk map
  int64_t snap = 0;          // the latest snapshot
  std::vector<Digest> first_digests;
};

// Snapshot 1: a quarter of the chunks all-zero (id 0) in extents of 64, the others new; then
// dedup lookups of all of them.
void FirstSnapshot(Bench& x) {
  const Options& o = x.o;
  x.map.assign(o.chunks, 0);
  auto t = Clock::now();
  x.b.Begin();
  x.snap = StartSnapshot(x.catalog, o.chunks, 1);
  for (uint64_t i = 0; i < o.chunks; ++i) {
    if (i % 256 < 192) x.map[i] = x.b.NewChunk();  // zero space comes in extents
  }
  WriteMap(x.catalog, x.b, x.snap, x.map, o.chunks, 1);
  const double first_s = Seconds(t);
  const uint64_t first_chunks = x.b.digests().size();
  std::printf(
      "snapshot 1: %llu new chunks and the map in %.1f s (%.2f us per chunk); catalog "
      "%.1f MiB\n",
      static_cast<unsigned long long>(first_chunks), first_s,
      first_s * 1e6 / static_cast<double>(o.chunks),
      static_cast<double>(FileBytes(x.path)) / (1 << 20));

  uint64_t misses = 0;
  x.first_digests = x.b.digests();
  const double lookup_s = LookupAll(x.catalog, x.first_digests, &misses);
  std::printf("dedup lookups at %llu chunks: %.1f s for %zu (%.2f us each, %llu misses)\n",
              static_cast<unsigned long long>(first_chunks), lookup_s, x.first_digests.size(),
              lookup_s * 1e6 / static_cast<double>(x.first_digests.size()),
              static_cast<unsigned long long>(misses));
}

// Snapshots 2..N, each rewriting --change of the chunks at random places.
void LaterSnapshots(Bench& x) {
  const Options& o = x.o;
  const uint64_t per_snapshot = static_cast<uint64_t>(static_cast<double>(o.chunks) * o.change);
  std::vector<double> later;
  for (int n = 2; n <= o.snapshots; ++n) {
    auto t = Clock::now();
    x.snap = StartSnapshot(x.catalog, o.chunks, n);
    for (uint64_t k = 0; k < per_snapshot; ++k) {
      const uint64_t i = x.b.rng()() % o.chunks;
      x.map[i] = x.b.NewChunk();
    }
    WriteMap(x.catalog, x.b, x.snap, x.map, o.chunks, n);
    later.push_back(Seconds(t));
  }
  x.b.Finish();
  std::sort(later.begin(), later.end());
  const double later_median = later.empty() ? 0 : later[later.size() / 2];
  const double later_max = later.empty() ? 0 : later.back();
  std::printf(
      "snapshots 2..%d: %llu new chunks and a full map each: median %.2f s, slowest %.2f "
      "s\n",
      o.snapshots, static_cast<unsigned long long>(per_snapshot), later_median, later_max);
}

// What the next snapshot and a restore do with a full catalog.
void ReadSide(Bench& x, uint64_t chunks_in_catalog) {
  const Options& o = x.o;
  uint64_t misses = 0;
  const double lookup_s = LookupAll(x.catalog, x.first_digests, &misses);
  std::printf("dedup lookups at %llu chunks: %.1f s for %zu (%.2f us each)\n",
              static_cast<unsigned long long>(chunks_in_catalog), lookup_s, x.first_digests.size(),
              lookup_s * 1e6 / static_cast<double>(x.first_digests.size()));
  auto t = Clock::now();
  auto list = x.catalog->Snapshots(false);
  if (!list.ok()) Die("Snapshots: " + list.status().ToString());
  std::printf("listing %zu snapshots: %.1f ms\n", list->size(), Seconds(t) * 1e3);
  t = Clock::now();
  uint64_t entries = 0, nonzero = 0;
  Check(x.catalog->ForEachMapSegment(x.snap,
                                     [&](uint64_t, const std::vector<int64_t>& ids) {
                                       entries += ids.size();
                                       for (int64_t id : ids)
                                         nonzero += id != 0;
                                       return Status::Ok();
                                     }),
        "ForEachMapSegment");
  std::printf("reading the last snapshot's map (%llu entries): %.1f ms\n",
              static_cast<unsigned long long>(entries), Seconds(t) * 1e3);
  if (entries != o.chunks) Die("the map read back has the wrong length");
  t = Clock::now();
  for (uint64_t k = 0; k < 100000; ++k) {
    const int64_t id = x.map[(k * 7919) % o.chunks];
    auto c = x.catalog->GetChunk(id != 0 ? id : 1);
    if (!c.ok()) Die("GetChunk: " + c.status().ToString());
  }
  std::printf("restore-side chunk lookups by id: %.2f us each\n", Seconds(t) * 10);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::filesystem::remove_all(o.dir);
  std::filesystem::create_directories(o.dir);
  const std::string path = o.dir + "/catalog.db";
  auto opened = Catalog::Open(path, true);
  if (!opened.ok()) Die("Open: " + opened.status().ToString());
  Catalog* catalog = opened->get();
  Builder b(catalog, o.batch);
  std::printf(
      "catalog-scale: %llu chunks of 4 MiB (%.1f TiB LUN), %d snapshots, %.1f %% changed "
      "per snapshot, transactions of %llu chunks, in %s\n",
      static_cast<unsigned long long>(o.chunks),
      static_cast<double>(o.chunks) * kChunkSize / (1ull << 40), o.snapshots, o.change * 100,
      static_cast<unsigned long long>(o.batch), path.c_str());

  Bench x{o, catalog, b, path, {}, 0, {}};
  FirstSnapshot(x);
  LaterSnapshots(x);
  auto stats = catalog->Stats();
  if (!stats.ok()) Die("Stats: " + stats.status().ToString());
  std::printf(
      "catalog: %llu chunks, %llu packs, %llu snapshots, %.1f MiB on disk (%.1f bytes "
      "per chunk)\n",
      static_cast<unsigned long long>(stats->chunks), static_cast<unsigned long long>(stats->packs),
      static_cast<unsigned long long>(stats->snapshots),
      static_cast<double>(FileBytes(path)) / (1 << 20),
      static_cast<double>(FileBytes(path)) / static_cast<double>(stats->chunks));
  ReadSide(x, stats->chunks);
  std::printf("peak RSS %llu MiB (the benchmark holds the %llu-entry map and the digests)\n",
              static_cast<unsigned long long>(PeakRssMiB()),
              static_cast<unsigned long long>(o.chunks));
  opened->reset();
  if (!o.keep) std::filesystem::remove_all(o.dir);
  return 0;
}
