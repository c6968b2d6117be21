// config.json (repository/repository.h, ParseRepositoryConfig).
#include <cstdint>
#include <string>

#include "repository/repository.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)wanbackup::pipeline::ParseRepositoryConfig(
      std::string(reinterpret_cast<const char*>(data), size), "config.json");
  return 0;
}
