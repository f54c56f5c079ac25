# dsperf's version: the number is project() in the top-level CMakeLists.txt, and nowhere else; the git
# commit is read here at configure time. Every tool prints both with --version (engine/common/version.h)
# and writes them into its JSON. Without a .git (a release tarball, Spack), pass -DDS_GIT_COMMIT=<sha>
# or get "unknown". The commit is the one at the last configure: re-run cmake after committing to
# refresh it (scripts/build.sh configures on every run).
if(NOT DEFINED DS_GIT_COMMIT)
  set(DS_GIT_COMMIT "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE _ds_sha OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _ds_rc ERROR_QUIET)
    if(_ds_rc EQUAL 0 AND _ds_sha)
      set(DS_GIT_COMMIT "${_ds_sha}")
      execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
                      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _ds_dirty ERROR_QUIET)
      if(_ds_dirty)
        string(APPEND DS_GIT_COMMIT "-dirty")
      endif()
    endif()
  endif()
endif()
message(STATUS "dsperf ${PROJECT_VERSION}, git commit ${DS_GIT_COMMIT}")
