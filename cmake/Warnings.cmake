# Warnings: ours are shown, and CI fails on them; third-party headers' are not ours.
#
# Third-party headers are system headers already (Debian's in /usr/include; CUDA's and MPI's come from
# imported targets as -isystem). GCC 12 still reports a warning inside a system header when the chain of
# inlined calls that reaches it starts in our code, and nlohmann/json (with JSON_DIAGNOSTICS) gives 178
# -Warray-bounds false positives that way. cmake/system-include/nlohmann/json.hpp wraps the library in a
# `#pragma GCC diagnostic` that silences exactly those; the folder goes first on the system include path,
# for every target, so no source file has to include it by another name.
include_directories(BEFORE SYSTEM ${PROJECT_SOURCE_DIR}/cmake/system-include)

add_compile_options(-Wall -Wextra -Wno-unused-parameter)

# DS_WERROR=ON turns every warning into an error. Off by default, so that a newer compiler's new warning
# does not stop a user's build. CI fails on warnings through scripts/build.sh's DS_WARNINGS_FAIL=1
# instead, which keeps the compile lines (and so the compiler cache) those of every other build.
option(DS_WERROR "Treat compiler warnings as errors (CI)" OFF)
if(DS_WERROR)
  add_compile_options(-Werror)
endif()

# A unity build (CMAKE_UNITY_BUILD, scripts/build.sh's default for a new folder) includes our .cpp files
# into one file per batch. GCC's -Wsubobject-linkage then sees a class of one .cpp holding a type of that
# file's anonymous namespace, which it accepts only in "the main file", and warns, though each .cpp
# compiles without it alone (the warning is about classes defined in headers). Off in unity builds only.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
endif()
