#include "guard/identity.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <system_error>

#include "initiator/iscsi_url.h"

namespace wanbackup::guard {
namespace {

namespace fs = std::filesystem;

FileId IdOf(const struct stat& st) {
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// The directories that hold `canonical` (an absolute path without symlinks), innermost first,
// from its deepest existing parent up to /.
std::vector<FileId> Directories(fs::path canonical) {
  std::vector<FileId> out;
  while (canonical.has_relative_path()) {
    canonical = canonical.parent_path();
    struct stat st {};
    if (::stat(canonical.c_str(), &st) == 0) out.push_back(IdOf(st));
  }
  return out;
}

std::string SysBlock(dev_t dev) {
  return "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
}

// The first line of a small sysfs file, "" when it cannot be read.
std::string SysLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The whole disk `dev` is a partition of, or 0 (sysfs: a partition's directory lies in its
// disk's, which holds that disk's "dev").
uint64_t WholeDisk(dev_t dev) {
  const std::string sys = SysBlock(dev);
  struct stat st {};
  if (::stat((sys + "/partition").c_str(), &st) != 0) return 0;
  unsigned major_number = 0, minor_number = 0;
  if (std::sscanf(SysLine(sys + "/../dev").c_str(), "%u:%u", &major_number, &minor_number) != 2) {
    return 0;
  }
  return static_cast<uint64_t>(makedev(major_number, minor_number));
}

// The file a loop device writes to (/sys/dev/block/M:m/loop/backing_file), or its disk's for a
// partition of a loop device (loop0p1); "" when it is neither or its file was deleted.
std::string LoopBackingFile(dev_t rdev) {
  const uint64_t whole = WholeDisk(rdev);
  std::string file =
      SysLine(SysBlock(whole != 0 ? static_cast<dev_t>(whole) : rdev) + "/loop/backing_file");
  if (file.ends_with(" (deleted)")) return "";
  return file;
}

}  // namespace

void FindLoopDevices(Identity* id) {
  const bool file = id->kind == Identity::Kind::kPath && id->exists && id->links != 0;
  const bool device = id->kind == Identity::Kind::kBlock && id->rdev != 0;
  if (!file && !device) return;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("loop")) continue;
    const std::string backing = SysLine(e.path().string() + "/loop/backing_file");
    struct stat st {};
    if (backing.empty() || backing.ends_with(" (deleted)") || ::stat(backing.c_str(), &st) != 0) {
      continue;
    }
    // A file by its inode; a device by its number: a loop device stacked on this one, on a
    // partition of it, or on the whole disk this one is a partition of (they share data).
    bool on_it = false;
    if (file) {
      on_it = IdOf(st) == id->file;
    } else if (S_ISBLK(st.st_mode)) {
      const auto under = static_cast<uint64_t>(st.st_rdev);
      on_it = under == id->rdev || WholeDisk(st.st_rdev) == id->rdev ||
              (id->whole_disk != 0 && under == id->whole_disk);
    }
    if (on_it) id->loop_devices.push_back("/dev/" + name);
  }
  std::sort(id->loop_devices.begin(), id->loop_devices.end());
}

namespace {

Identity IdentifyPath(const std::string& spec) {
  Identity id;
  id.kind = Identity::Kind::kPath;
  std::error_code ec;
  // weakly_canonical: the existing part resolved (symlinks, `.`, `..`), the rest appended.
  const fs::path canonical = fs::weakly_canonical(fs::absolute(spec, ec), ec);
  id.spelling = ec ? spec : canonical.string();
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) id.error = ec.message();
    return id;
  }
  id.directories = Directories(canonical);
  struct stat st {};
  if (::stat(canonical.c_str(), &st) != 0) {
    if (errno != ENOENT) id.error = std::strerror(errno);
    return id;
  }
  id.exists = true;
  id.file = IdOf(st);
  id.whole_disk = WholeDisk(st.st_dev);
  if (S_ISBLK(st.st_mode)) {
    id.kind = Identity::Kind::kBlock;
    id.rdev = static_cast<uint64_t>(st.st_rdev);
    id.whole_disk = WholeDisk(st.st_rdev);
    if (std::string file = LoopBackingFile(st.st_rdev); !file.empty()) {
      id.backing.push_back(IdentifyPath(file));
    }
  } else if (S_ISREG(st.st_mode)) {
    id.links = static_cast<uint64_t>(st.st_nlink);
  } else if (S_ISCHR(st.st_mode)) {
    id.character = true;
    id.rdev = static_cast<uint64_t>(st.st_rdev);
  }
  return id;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  while (!text.empty() && text.back() == '.')
    text.pop_back();  // a fully qualified name's root
  return text;
}

// "loopback", or the canonical text of a numeric address; "" when `host` is not numeric.
std::string NumericHost(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) == 127) return "loopback";
    return ::inet_ntop(AF_INET, &v4, text, sizeof text) != nullptr ? text : host;
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return "loopback";
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      std::memcpy(&v4, &v6.s6_addr[12], sizeof v4);
      return NumericHost(::inet_ntop(AF_INET, &v4, text, sizeof text));
    }
    return ::inet_ntop(AF_INET6, &v6, text, sizeof text) != nullptr ? text : host;
  }
  return "";
}

// Whether `dir` holds a wanbackup repository: config.json and packs/ (catalog.db may be gone,
// 'repair catalog' rebuilds it from the packs).
bool LooksLikeRepository(const fs::path& dir) {
  struct stat config {};
  struct stat packs {};
  return ::lstat((dir / "config.json").c_str(), &config) == 0 && S_ISREG(config.st_mode) &&
         ::lstat((dir / "packs").c_str(), &packs) == 0 && S_ISDIR(packs.st_mode);
}

// What a repository's file `path` is by its content ("a pack", "config.json", "catalog.db"),
// or "" when it is none: for a hard link to one found where no repository is (docs/format.md:
// a pack's magic, config.json's keys, the catalog's tables in its first pages).
std::string RepositoryFileByContent(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(size_t{64} * 1024, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.starts_with("WBPACK01")) return "a pack";
  if (head.starts_with("{") && head.find("\"repository_id\"") != std::string::npos &&
      head.find("\"format\"") != std::string::npos) {
    return "config.json";
  }
  if (head.starts_with(std::string("SQLite format 3\0", 16)) &&
      head.find("CREATE TABLE snapshot_maps") != std::string::npos) {
    return "catalog.db";
  }
  return "";
}

// `to` when it is an existing regular file, and each existing regular file a loop device `to`
// writes to.
std::vector<Identity> RegularFiles(const Identity& to) {
  std::vector<Identity> out;
  if (to.kind == Identity::Kind::kPath && to.exists && to.links > 0) out.push_back(to);
  for (const Identity& file : to.backing) {
    for (Identity& f : RegularFiles(file))
      out.push_back(std::move(f));
  }
  return out;
}

// Calls `fn` with every regular file under `root` (lstat: links not followed). A directory that
// cannot be read is passed over and the walk goes on with the others: one unreadable directory
// does not hide the files of the rest.
void ForEachRegularFile(const std::string& root,
                        const std::function<void(const std::string&, const struct stat&)>& fn) {
  std::vector<fs::path> todo = {root};
  while (!todo.empty()) {
    const fs::path dir = std::move(todo.back());
    todo.pop_back();
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) todo.push_back(it->path());
      if (S_ISREG(st.st_mode)) fn(it->path().string(), st);
    }
  }
}

}  // namespace

Identity Identify(const std::string& spec) {
  if (!initiator::LooksLikeIscsiUrl(spec)) return IdentifyPath(spec);
  Identity id;
  id.spelling = spec;
  const Result<initiator::IscsiUrl> url = initiator::ParseIscsiUrl(spec);
  if (!url.ok() || !url->lun || url->target.empty()) return id;
  id.kind = Identity::Kind::kLun;
  id.lun = url->target + "/" + std::to_string(*url->lun);
  id.host = url->host;
  return id;
}

std::vector<std::string> HostAddresses(const std::string& host) {
  const std::string name = Lower(host);
  if (name == "localhost" || name.ends_with(".localhost")) return {"loopback"};
  if (std::string numeric = NumericHost(name); !numeric.empty()) return {numeric};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return {};
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (::inet_ntop(a->ai_family, addr, text, sizeof text) == nullptr) continue;
    const std::string numeric = NumericHost(text);
    if (std::find(out.begin(), out.end(), numeric) == out.end()) out.push_back(numeric);
  }
  ::freeaddrinfo(found);
  return out;
}

void ResolveHosts(Destination* to, std::vector<Protected>* protect) {
  if (to->identity.kind != Identity::Kind::kLun) return;
  std::map<std::string, std::vector<std::string>> known;
  auto resolve = [&known](Identity* id) {
    auto [it, added] = known.try_emplace(id->host);
    if (added) it->second = HostAddresses(id->host);
    id->hosts = it->second;
  };
  resolve(&to->identity);
  for (Protected& p : *protect) {
    if (p.identity.kind == Identity::Kind::kLun && p.identity.lun == to->identity.lun) {
      resolve(&p.identity);
    }
  }
}

void AddRepository(const std::string& path, const Identity& to, std::vector<Protected>* protect) {
  Protected dir;
  dir.rule = Rule::kRepository;
  dir.identity = Identify(path);
  dir.what = "repository " + path;
  dir.tree = true;
  protect->push_back(dir);
  if (!dir.identity.exists) return;
  // An existing regular file outside its tree (or a loop device's file) may still be one of its
  // files: a hard link, or a file bind-mounted over another path (one link, same inode, and the
  // same st_dev as the original). Only an inode tells, and only one on the repository's device.
  std::vector<uint64_t> devices;
  for (const Identity& file : RegularFiles(to))
    devices.push_back(file.file.dev);
  if (std::find(devices.begin(), devices.end(), dir.identity.file.dev) == devices.end()) return;
  ForEachRegularFile(path, [&](const std::string& name, const struct stat& st) {
    Protected file;
    file.rule = Rule::kRepository;
    file.identity.kind = Identity::Kind::kPath;
    file.identity.exists = true;
    file.identity.file = IdOf(st);
    file.identity.spelling = name;
    file.what = "repository " + path;
    protect->push_back(file);
  });
}

}  // namespace wanbackup::guard

namespace wanbackup::guard {

void AddRepositoriesHolding(const Identity& to, std::vector<Protected>* protect) {
  // A loop device writes its file: the repositories that file lies in are the device's too.
  for (const Identity& file : to.backing)
    AddRepositoriesHolding(file, protect);
  if (to.kind != Identity::Kind::kPath || to.spelling.empty() || to.spelling[0] != '/') return;
  // A hard link to a repository's file, outside every repository: known by what it holds.
  if (to.exists && to.links > 1) {
    if (const std::string what = RepositoryFileByContent(to.spelling); !what.empty()) {
      Protected file;
      file.rule = Rule::kRepository;
      file.identity = to;
      file.what = "a wanbackup repository (by its content: " + what + ", with " +
                  std::to_string(to.links) + " hard links)";
      protect->push_back(file);
    }
  }
  for (fs::path dir(to.spelling);; dir = dir.parent_path()) {
    if (LooksLikeRepository(dir)) AddRepository(dir.string(), to, protect);
    if (!dir.has_relative_path()) return;
  }
}

}  // namespace wanbackup::guard
