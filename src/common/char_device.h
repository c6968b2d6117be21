// Which character devices a disk image may be written to. A restore or copy to a character
// device writes the image's bytes as a stream: to /dev/null (a read test), a terminal or a tape
// that is what the user asked for; to /dev/mem, /dev/port, a SCSI generic node, a flash (MTD)
// or a watchdog node it damages the machine, and even opening some of them acts. So every other
// character device is refused before it is opened (docs/threat-model.md, "Write targets").
// Thread-safe (no state).
#pragma once

#include <sys/types.h>

#include <string>

namespace wanbackup {

// True for /dev/null, terminals (ttys, consoles, pseudo-terminals) and SCSI tapes.
bool StreamableCharacterDevice(dev_t rdev);

// "NAME is a character device (MAJOR:MINOR); ..." when `rdev` is not streamable, else "".
std::string CharacterDeviceRefusal(const std::string& name, dev_t rdev);

}  // namespace wanbackup
