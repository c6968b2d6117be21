#include "common/char_device.h"

#include <sys/sysmacros.h>

namespace wanbackup {

bool StreamableCharacterDevice(dev_t rdev) {
  const unsigned int major = ::major(rdev), minor = ::minor(rdev);
  // Documented in the kernel's admin-guide/devices.txt.
  if (major == 1) return minor == 3;              // mem class: /dev/null only
  if (major == 4 || major == 5) return true;      // ttys, /dev/tty, /dev/console, ptmx
  if (major >= 136 && major <= 143) return true;  // /dev/pts/N
  return major == 9;                              // SCSI tapes (st, nst)
}

std::string CharacterDeviceRefusal(const std::string& name, dev_t rdev) {
  if (StreamableCharacterDevice(rdev)) return "";
  return name + " is a character device (" + std::to_string(::major(rdev)) + ":" +
         std::to_string(::minor(rdev)) +
         "); a disk is written to a file, a block device, a tape, a terminal, /dev/null or a "
         "pipe. Nothing was written";
}

}  // namespace wanbackup
