// Which sources are one disk (jobs/source_identity.h): forget's series and a job's snapshots.
#include "jobs/source_identity.h"

#include <unistd.h>

#include <fstream>

#include <catch2/catch.hpp>

#include "support/temp_dir.h"

namespace wanbackup::jobs {
namespace {

TEST_CASE("source identity: one LUN is one identity whatever the portal is called", "[series]") {
  const std::string lun = "/iqn.2001-05.com.example:db/1";
  CHECK(SourceIdentity("iscsi://localhost" + lun) == SourceIdentity("iscsi://127.0.0.1" + lun));
  CHECK(SourceIdentity("iscsi://localhost" + lun) == SourceIdentity("iscsi://10.0.0.5:3261" + lun));
  CHECK(SourceIdentity("iscsi://localhost" + lun) !=
        SourceIdentity("iscsi://localhost/iqn.2001-05.com.example:db/2"));
  CHECK(SourceIdentity("iscsi://localhost" + lun) !=
        SourceIdentity("iscsi://localhost/iqn.2001-05.com.example:web/1"));
}

TEST_CASE("source identity: a local file is known by its inode, else by its normal path",
          "[series]") {
  testing::TempDir dir("identity");
  const std::string image = dir / "disk.img";
  std::ofstream(image) << "data";
  REQUIRE(::symlink(image.c_str(), (dir / "link.img").c_str()) == 0);
  CHECK(SourceIdentity(image) == SourceIdentity(dir / "link.img"));
  CHECK(SourceIdentity(image) == SourceIdentity(dir.path() + "/./disk.img"));
  CHECK(SourceIdentity(image) != SourceIdentity(dir / "other.img"));
  // Gone (a volume removed since): the path, normalised.
  CHECK(SourceIdentity("/nonexistent/vg0/../vg0/db") == SourceIdentity("/nonexistent/vg0/db"));
  CHECK(SourceIdentity("/nonexistent/vg0/db") != SourceIdentity("/nonexistent/vg0/web"));
}

}  // namespace
}  // namespace wanbackup::jobs
