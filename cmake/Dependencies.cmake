# Finds every third-party dependency from Debian packages. A missing one stops configuration
# with the name of the Debian package that provides it; scripts/install-deps installs them all.
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package pkg-config "
                      "(apt-get install pkg-config), or run scripts/install-deps")
endif()

# wb_require_pkg(<prefix> <pkg-config module> <debian package>) defines PkgConfig::<prefix>.
function(wb_require_pkg prefix module debian_package)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "${module} not found: install the Debian package ${debian_package} "
                        "(apt-get install ${debian_package}), or run scripts/install-deps")
  endif()
  message(STATUS "Found ${module} ${${prefix}_VERSION}")
endfunction()

# wb_require_cmake(<package> <debian package> [find_package args...]).
macro(wb_require_cmake package debian_package)
  find_package(${package} ${ARGN} CONFIG QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "${package} not found: install the Debian package ${debian_package} "
                        "(apt-get install ${debian_package}), or run scripts/install-deps")
  endif()
  message(STATUS "Found ${package} ${${package}_VERSION}")
endmacro()

wb_require_pkg(LIBISCSI libiscsi libiscsi-dev)
wb_require_pkg(ZSTD libzstd libzstd-dev)
wb_require_pkg(SODIUM libsodium libsodium-dev)
wb_require_pkg(LIBCRYPTO libcrypto libssl-dev)
wb_require_pkg(LIBCURL libcurl libcurl4-openssl-dev)
wb_require_pkg(SQLITE3 sqlite3 libsqlite3-dev)
wb_require_pkg(TOMLPP tomlplusplus libtomlplusplus-dev)
wb_require_pkg(FUSE3 fuse3 libfuse3-dev)
wb_require_cmake(CLI11 libcli11-dev)
wb_require_cmake(nlohmann_json nlohmann-json3-dev)
if(WANBACKUP_BUILD_TESTS)
  wb_require_cmake(Catch2 catch2 2)
endif()
find_package(Threads REQUIRED)
