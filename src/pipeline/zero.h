// Zero detection: all-zero data is stored as nothing and written as holes. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <cstdint>

namespace wanbackup::pipeline {

// True when all `length` bytes are zero. Reads at memory speed (word-wise, vectorized).
bool IsAllZero(const uint8_t* data, size_t length);

}  // namespace wanbackup::pipeline
