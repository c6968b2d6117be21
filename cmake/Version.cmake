# Writes version.h with the project version and, when built from a git checkout, the commit.
find_package(Git QUIET)
set(WANBACKUP_GIT_COMMIT "unknown")
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                  OUTPUT_VARIABLE WANBACKUP_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
endif()
if(NOT WANBACKUP_GIT_COMMIT)
  set(WANBACKUP_GIT_COMMIT "unknown")
endif()
configure_file("${PROJECT_SOURCE_DIR}/src/common/version.h.in"
               "${PROJECT_BINARY_DIR}/generated/common/version.h" @ONLY)
