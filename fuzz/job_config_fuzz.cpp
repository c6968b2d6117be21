// The job configuration file (jobs/config.h, LoadConfig): TOML through toml++, then every key's
// checks, schedules included. LoadConfig reads a path, so each input goes to a private file.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "jobs/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/wb-job-config-fuzz-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return 0;
  const bool written = ::write(fd, data, size) == static_cast<ssize_t>(size);
  ::close(fd);
  if (written) (void)wanbackup::jobs::LoadConfig(path);
  return 0;
}
