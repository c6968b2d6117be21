#include "repository/trust_anchor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>

#include "common/read_file.h"
#include "common/text.h"
#include "store/fs_util.h"

namespace wanbackup::pipeline {
namespace {

constexpr char kAnchorMagic[] = "wanbackup-trust-anchor 1";
constexpr char kAnchorFile[] = "anchor";

bool ValidId(const std::string& id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// mkdir -p with mode 0700 for what it creates; an existing directory is kept as it is.
// The security directory must be root's or the user's and writable by nobody else: another user
// who could remove anchors would turn every check back into trust on first use.
// The repository `dir` lies in (a directory above it, or itself, holding config.json and
// packs/), or "".
std::string RepositoryAround(const std::string& dir) {
  std::string at = dir;  // from the nearest directory that exists (the anchors may be made later)
  char* real = nullptr;
  while ((real = ::realpath(at.c_str(), nullptr)) == nullptr) {
    const size_t slash = at.rfind('/');
    if (slash == std::string::npos || slash == 0) return "";
    at.resize(slash);
  }
  at = real;
  std::free(real);
  for (;;) {
    struct stat config {
    }, packs{};
    if (::lstat((at + "/config.json").c_str(), &config) == 0 && S_ISREG(config.st_mode) &&
        ::lstat((at + "/packs").c_str(), &packs) == 0 && S_ISDIR(packs.st_mode)) {
      return at;
    }
    const size_t slash = at.rfind('/');
    if (slash == std::string::npos || at == "/") return "";
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
}

Status CheckOwnDirectory(const std::string& dir) {
  if (const std::string repo = RepositoryAround(dir); !repo.empty()) {
    return Status::PermissionDenied(
        "trust anchor directory " + dir + " lies in repository " + repo +
        ": whoever can change the repository could then change the anchors it is checked "
        "against (set $WANBACKUP_SECURITY_DIR to a directory outside every repository)");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::Ok();  // made later, 0700
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Status::PermissionDenied(
        "trust anchor directory " + dir + " is owned by uid " + std::to_string(st.st_uid) +
        ", not root or you: its owner could remove the anchors this client checks "
        "repositories against (chown it, or set $WANBACKUP_SECURITY_DIR to a directory of yours)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::PermissionDenied("trust anchor directory " + dir +
                                    " is writable by group or others: they could remove the "
                                    "anchors this client checks repositories against (chmod 700 " +
                                    dir + ")");
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  std::string so_far = !path.empty() && path[0] == '/' ? "" : ".";
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    so_far += "/" + part;
    if (::mkdir(so_far.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "creating " + so_far);
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "reading " + path);
  if (!S_ISDIR(st.st_mode)) return Status::PermissionDenied(path + " is not a directory");
  return Status::Ok();
}

// A control character (a newline above all) in a value would start a line of its own in the
// anchor file and could set any key: such values are never written, nor read.
bool HasControl(const std::string& value) {
  return std::any_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// An fd that closes itself.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string EncodeAnchor(const AnchorRecord& r) {
  std::string out = std::string(kAnchorMagic) + "\n";
  out += "repository_id " + r.repository_id + "\n";
  out += "encryption " + r.encryption + "\n";
  out += "key_fingerprint " + r.key_fingerprint + "\n";
  out += "head_counter " + std::to_string(r.head_counter) + "\n";
  if (r.highest_snapshot != 0)
    out += "highest_snapshot " + std::to_string(r.highest_snapshot) + "\n";
  for (const std::string& l : r.locations)
    out += "location " + l + "\n";
  return out;
}

Status CheckAnchorValues(const AnchorRecord& r) {
  std::vector<std::string> values = {r.repository_id, r.encryption, r.key_fingerprint};
  values.insert(values.end(), r.locations.begin(), r.locations.end());
  for (const std::string& v : values) {
    if (HasControl(v)) {
      return Status::InvalidArgument("'" + EscapeControl(v) +
                                     "' holds a control character, which a trust anchor cannot "
                                     "record; use a repository path without one");
    }
  }
  return Status::Ok();
}

namespace {

// One "key value" line into `r`; `seen` holds the single-value keys met so far.
Status DecodeAnchorLine(const std::string& line, AnchorRecord& r, std::set<std::string>& seen) {
  const size_t space = line.find(' ');
  const std::string key = line.substr(0, space);
  const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
  // Only the key fingerprint may be empty (an anchor written before the key was unlocked).
  if (space == std::string::npos || key.empty() || (value.empty() && key != "key_fingerprint") ||
      HasControl(line)) {
    return Status::Corruption("malformed line '" + EscapeControl(line) + "'");
  }
  if (key != "location" && !seen.insert(key).second) {
    return Status::Corruption("'" + key + "' appears twice");
  }
  if (key == "repository_id") {
    r.repository_id = value;
  } else if (key == "encryption") {
    r.encryption = value;
  } else if (key == "key_fingerprint") {
    r.key_fingerprint = value;
  } else if (key == "head_counter") {
    const std::optional<uint64_t> n = ParseDecimalU64(value);
    if (!n) return Status::Corruption("malformed head_counter '" + value + "'");
    r.head_counter = *n;
  } else if (key == "highest_snapshot") {
    const std::optional<uint64_t> n = ParseDecimalU64(value);
    if (!n) return Status::Corruption("malformed highest_snapshot '" + value + "'");
    r.highest_snapshot = *n;
  } else if (key == "location") {
    r.locations.push_back(value);
  } else {
    return Status::Corruption("unknown key '" + key + "'");
  }
  return Status::Ok();
}

}  // namespace

Result<AnchorRecord> DecodeAnchor(const std::string& text) {
  if (text.empty() || text.back() != '\n') return Status::Corruption("not a whole trust anchor");
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kAnchorMagic) {
    return Status::Corruption("not a wanbackup trust anchor");
  }
  AnchorRecord r;
  std::set<std::string> seen;
  while (std::getline(in, line))
    WB_RETURN_IF_ERROR(DecodeAnchorLine(line, r, seen));
  if (!ValidId(r.repository_id) || r.encryption.empty() || seen.count("head_counter") == 0) {
    return Status::Corruption("a trust anchor lacks its id, encryption or head counter");
  }
  return r;
}

std::string DefaultSecurityDir() {
  if (const char* dir = std::getenv("WANBACKUP_SECURITY_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (::geteuid() == 0) return "/var/lib/wanbackup/security";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && state[0] == '/') {
    return std::string(state) + "/wanbackup/security";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.local/state/wanbackup/security";
}

Result<std::optional<AnchorRecord>> TrustAnchorStore::Load(const std::string& id) const {
  if (!ValidId(id)) return Status::Corruption("'" + id + "' is not a repository id");
  WB_RETURN_IF_ERROR(CheckOwnDirectory(dir_));
  const std::string path = dir_ + "/" + id + "/" + kAnchorFile;
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0 && errno == ENOENT) return std::optional<AnchorRecord>();
  if (f.fd < 0) return Status::FromErrno(errno, "reading " + path);
  WB_ASSIGN_OR_RETURN(const std::string text, ReadToEnd(f.fd, path));
  Result<AnchorRecord> r = DecodeAnchor(text);
  if (!r.ok()) {
    return Status::Corruption("trust anchor " + path + ": " + r.status().message() +
                              " (remove it and run 'wanbackup trust' to start afresh)");
  }
  if (r->repository_id != id) {
    return Status::Corruption("trust anchor " + path + " names another repository");
  }
  return std::optional<AnchorRecord>(std::move(*r));
}

Result<std::vector<AnchorRecord>> TrustAnchorStore::All() const {
  std::vector<AnchorRecord> out;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr && errno == ENOENT) return out;
  if (d == nullptr) return Status::FromErrno(errno, "reading " + dir_);
  std::vector<std::string> ids;
  while (dirent* e = ::readdir(d)) {
    if (ValidId(e->d_name)) ids.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    WB_ASSIGN_OR_RETURN(std::optional<AnchorRecord> r, Load(id));
    if (r) out.push_back(std::move(*r));
  }
  return out;
}

Result<std::optional<std::string>> TrustAnchorStore::IdAt(const std::string& location,
                                                          const std::string& except) const {
  WB_ASSIGN_OR_RETURN(const std::vector<AnchorRecord> all, All());
  for (const AnchorRecord& r : all) {
    if (r.repository_id == except) continue;
    for (const std::string& l : r.locations) {
      if (l == location) return std::optional<std::string>(r.repository_id);
    }
  }
  return std::optional<std::string>();
}

Status TrustAnchorStore::Update(
    const std::string& id, const std::function<bool(std::optional<AnchorRecord>&)>& update) const {
  if (!ValidId(id)) return Status::Corruption("'" + id + "' is not a repository id");
  const std::string dir = dir_ + "/" + id;
  WB_RETURN_IF_ERROR(CheckOwnDirectory(dir_));
  WB_RETURN_IF_ERROR(MakeDirs(dir));
  Fd lock{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (lock.fd < 0) return Status::FromErrno(errno, "opening " + dir);
  while (::flock(lock.fd, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "locking " + dir);
  }
  WB_ASSIGN_OR_RETURN(std::optional<AnchorRecord> record, Load(id));
  if (!update(record) || !record) return Status::Ok();
  return Write(*record);
}

Status TrustAnchorStore::Write(const AnchorRecord& record) const {
  WB_RETURN_IF_ERROR(CheckAnchorValues(record));
  const std::string dir = dir_ + "/" + record.repository_id;
  std::random_device rng;
  const std::string tmp = dir + "/." + kAnchorFile + "." + std::to_string(::getpid()) + "." +
                          std::to_string(rng()) + ".tmp";
  const std::string text = EncodeAnchor(record);
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
    if (f.fd < 0) return Status::FromErrno(errno, "creating " + tmp);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return Status::FromErrno(err, "writing " + tmp);
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(f.fd) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return Status::FromErrno(err, "flushing " + tmp);
    }
  }
  if (::rename(tmp.c_str(), (dir + "/" + kAnchorFile).c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(err, "renaming " + tmp);
  }
  return SyncDir(dir);
}

}  // namespace wanbackup::pipeline
