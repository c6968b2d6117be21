#include "repository/record.h"

#include <cstring>

#include <sodium.h>
#include <zstd.h>

#include "common/bytes.h"
#include "repository/primitives.h"

namespace wanbackup::pipeline {
namespace {

constexpr uint8_t kMagic[4] = {'W', 'B', 'R', 'C'};
constexpr uint8_t kVersion = 1;
constexpr size_t kNonce = primitives::kNonceSize;
constexpr size_t kTag = primitives::kTagSize;

// Associated data: what the header says about the payload, so it cannot be swapped. Chunks
// keep format 1's 37 bytes; other kinds add the kind byte. Returns the length.
size_t AssociatedData(const Digest& digest, uint32_t raw_size, uint8_t flags, RecordKind kind,
                      uint8_t* ad) {
  std::memcpy(ad, digest.data(), digest.size());
  PutU32(ad + 32, raw_size);
  ad[36] = flags;
  if (kind == RecordKind::kChunk) return 37;
  ad[37] = static_cast<uint8_t>(kind);
  return 38;
}

struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
  }
};

}  // namespace

uint32_t Crc32c(const uint8_t* data, size_t size, uint32_t crc) {
  static const Crc32cTable table;
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table.t[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void WriteRecordHeader(const RecordHeader& h, uint8_t* out) {
  std::memset(out, 0, kRecordHeaderSize);
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion;
  out[5] = h.flags;
  out[6] = static_cast<uint8_t>(h.kind);
  PutU32(out + 8, h.raw_size);
  PutU32(out + 12, h.stored_size);
  std::memcpy(out + 16, h.digest.data(), h.digest.size());
  PutU32(out + 60, Crc32c(out, 60));
}

Result<RecordHeader> ParseRecordHeader(const uint8_t* in) {
  if (std::memcmp(in, kMagic, 4) != 0) return Status::Corruption("no record at this offset");
  if (GetU32(in + 60) != Crc32c(in, 60))
    return Status::Corruption("record header checksum mismatch");
  if (in[4] != kVersion) {
    return Status::Unsupported("record version " + std::to_string(in[4]) + " is unknown");
  }
  if (in[6] > kMaxRecordKind) {
    return Status::Unsupported("record kind " + std::to_string(in[6]) + " is unknown");
  }
  RecordHeader h;
  h.flags = in[5];
  h.kind = static_cast<RecordKind>(in[6]);
  h.raw_size = GetU32(in + 8);
  h.stored_size = GetU32(in + 12);
  std::memcpy(h.digest.data(), in + 16, h.digest.size());
  return h;
}

// One compression and one decompression context, freed with the codec.
struct RecordCodec::ZstdContexts {
  struct FreeCCtx {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  };
  struct FreeDCtx {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
  };
  std::unique_ptr<ZSTD_CCtx, FreeCCtx> cctx{ZSTD_createCCtx()};
  std::unique_ptr<ZSTD_DCtx, FreeDCtx> dctx{ZSTD_createDCtx()};
};

RecordCodec::RecordCodec(const KeySet& keys, int zstd_level)
    : keys_(keys), level_(zstd_level), zstd_(std::make_unique<ZstdContexts>()) {}

RecordCodec::~RecordCodec() = default;

const uint8_t* RecordCodec::Compress(const uint8_t* data, size_t size, size_t* out_size,
                                     uint8_t* flags) {
  *flags = 0;
  *out_size = size;
  if (level_ == 0) return data;
  const size_t bound = ZSTD_compressBound(size);
  if (scratch_.size() < bound) scratch_.resize(bound);
  const size_t n = ZSTD_compressCCtx(zstd_->cctx.get(), scratch_.data(), bound, data, size, level_);
  if (ZSTD_isError(n) || n >= size - size / 32) return data;  // saves under 3 %: keep it raw
  *flags = kRecordCompressed;
  *out_size = n;
  return scratch_.data();
}

void RecordCodec::Seal(const uint8_t* payload, size_t payload_size, uint8_t flags,
                       uint32_t raw_size, const Digest& digest, std::vector<uint8_t>* out,
                       RecordKind kind) {
  RecordHeader h;
  h.kind = kind;
  h.raw_size = raw_size;
  h.digest = digest;
  h.flags = flags | (keys_.encrypted() ? kRecordEncrypted : 0);
  h.stored_size = static_cast<uint32_t>(payload_size + (keys_.encrypted() ? kNonce + kTag : 0));
  const size_t start = out->size();
  out->resize(start + kRecordHeaderSize + h.stored_size);
  uint8_t* p = out->data() + start;
  WriteRecordHeader(h, p);
  p += kRecordHeaderSize;
  if (!keys_.encrypted()) {
    std::memcpy(p, payload, payload_size);
    return;
  }
  uint8_t ad[38];
  const size_t ad_size = AssociatedData(digest, raw_size, h.flags, kind, ad);
  randombytes_buf(p, kNonce);
  primitives::Seal(keys_.data_key().data(), p, ad, ad_size, payload, payload_size, p + kNonce);
}

Digest RecordCodec::SealWhole(const uint8_t* data, size_t size, RecordKind kind,
                              std::vector<uint8_t>* out) {
  const Digest digest = keys_.DigestOf(data, size);
  size_t payload_size = 0;
  uint8_t flags = 0;
  const uint8_t* payload = Compress(data, size, &payload_size, &flags);
  Seal(payload, payload_size, flags, static_cast<uint32_t>(size), digest, out, kind);
  return digest;
}

Status RecordCodec::Open(const RecordHeader& h, const uint8_t* payload, uint8_t* out) {
  const uint8_t* plain = payload;
  size_t plain_size = h.stored_size;
  if ((h.flags & kRecordEncrypted) != 0) {
    if (!keys_.encrypted())
      return Status::Corruption("an encrypted record in an unencrypted repository");
    if (h.stored_size < kNonce + kTag) return Status::Corruption("record too short");
    plain_size = h.stored_size - kNonce - kTag;
    if (scratch_.size() < plain_size) scratch_.resize(plain_size);
    uint8_t ad[38];
    const size_t ad_size = AssociatedData(h.digest, h.raw_size, h.flags, h.kind, ad);
    if (!primitives::Open(keys_.data_key().data(), payload, ad, ad_size, payload + kNonce,
                          h.stored_size - kNonce, scratch_.data())) {
      return Status::Corruption("authentication failed (the record was altered or damaged)");
    }
    plain = scratch_.data();
  } else if (keys_.encrypted()) {
    return Status::Corruption("an unencrypted record in an encrypted repository");
  }
  if ((h.flags & kRecordCompressed) != 0) {
    const size_t n = ZSTD_decompressDCtx(zstd_->dctx.get(), out, h.raw_size, plain, plain_size);
    if (ZSTD_isError(n) || n != h.raw_size)
      return Status::Corruption("the record does not decompress");
  } else {
    if (plain_size != h.raw_size) return Status::Corruption("the record has the wrong size");
    if (plain_size > 0) std::memcpy(out, plain, plain_size);  // `out` may be null when empty
  }
  if (keys_.DigestOf(out, h.raw_size) != h.digest) {
    return Status::Corruption("the chunk does not match its digest");
  }
  return Status::Ok();
}

}  // namespace wanbackup::pipeline
