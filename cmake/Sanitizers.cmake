# DS_SANITIZE: build every target with sanitizers. One of
#   ""        no sanitizer (default)
#   address   AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer together
#   thread    ThreadSanitizer
# scripts/build.sh --sanitize=<mode> and scripts/test.sh --sanitize=<mode> configure build-asan/ or
# build-tsan/ with it. Sanitizer modes build without CUDA (nvcc's device code and the CUDA runtime are
# not instrumented, and the sanitizers' shadow memory clashes with the CUDA driver's mappings).
set(DS_SANITIZE "" CACHE STRING "Sanitizer build: empty (none), address (ASan+UBSan) or thread (TSan)")
set_property(CACHE DS_SANITIZE PROPERTY STRINGS "" address thread)

# ds_sanitizer_optimised(<targets...>): in a sanitizer build these compile at -O1, everything else at
# -O0 (below). For the engine (dsengine, dsddp): its multi-process tests run against timeouts, and
# its instrumented hot loops at -O0 would slow them further. Elsewhere the instrumentation is the same
# at -O0 and the compile takes half the time (docs/dev/testing.md, CI's cold time). No-op otherwise.
function(ds_sanitizer_optimised)
  if(DS_SANITIZE AND CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    foreach(t IN LISTS ARGN)
      target_compile_options(${t} PRIVATE -O1)
    endforeach()
  endif()
endfunction()

# ds_benchmark_only(<targets...>): benchmarks that no test runs. A sanitizer build leaves them out of
# `all` (their figures mean nothing there, and they were 9 % of CI's cold sanitizer build);
# `cmake --build build-asan --target NAME` still builds one. No-op otherwise.
function(ds_benchmark_only)
  if(DS_SANITIZE)
    set_target_properties(${ARGN} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
endfunction()

if(DS_SANITIZE STREQUAL "")
  return()
endif()
if(NOT DS_SANITIZE MATCHES "^(address|thread)$")
  message(FATAL_ERROR "DS_SANITIZE='${DS_SANITIZE}' is not a sanitizer mode; use address (ASan+UBSan), "
                      "thread (TSan) or leave it empty")
endif()

string(TOUPPER "${DS_WITH_CUDA}" _ds_san_cuda)
if(_ds_san_cuda STREQUAL "ON")
  message(FATAL_ERROR "DS_SANITIZE=${DS_SANITIZE} builds without CUDA, but DS_WITH_CUDA=ON was asked for; "
                      "configure with -DDS_WITH_CUDA=OFF (scripts/build.sh --sanitize does)")
endif()
set(DS_WITH_CUDA OFF CACHE STRING "Build CUDA support: AUTO, ON or OFF" FORCE)
message(STATUS "DS_SANITIZE=${DS_SANITIZE}: DS_WITH_CUDA forced OFF")

if(DS_SANITIZE STREQUAL "address")
  # -fno-sanitize-recover=all: the first UBSan finding aborts the test instead of scrolling past.
  set(DS_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
else()
  set(DS_SANITIZE_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
endif()
add_compile_options(${DS_SANITIZE_FLAGS})
# Our own macro, because the compilers differ: GCC defines __SANITIZE_ADDRESS__/__SANITIZE_THREAD__,
# clang 14 (CI's sanitizer build, .ci/run) defines neither and answers __has_feature instead.
if(DS_SANITIZE STREQUAL "address")
  add_compile_definitions(DS_SANITIZE_ADDRESS=1)
else()
  add_compile_definitions(DS_SANITIZE_THREAD=1)
endif()
# -O0 instead of the build type's -O2 (it comes later on the command line, so it wins; Debug is -O0
# already), except the engine's targets, which ds_sanitizer_optimised() puts at -O1, as the
# sanitizers' own docs advise for speed. Reports keep their frames either way. Compile CPU of one
# unity batch with clang: 24.4 s at -O1, 11.3 s at -O0 (GCC: 35.8 s and 18.8 s).
if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  add_compile_options(-O0)
endif()
add_link_options(${DS_SANITIZE_FLAGS})
# GCC 12's -Wmaybe-uninitialized sees through the sanitizers' instrumentation at -O1 and reports
# reads that are not there: 42 of them in the ASan build, in libstdc++'s <regex> (std::function
# inside _NFA) and in a ternary over two static arrays, none in the -O2 build that CI's warning gate
# reads. The normal build keeps the warning; only sanitizer builds drop it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()

# The run-time options (halt_on_error, the suppression files) are compiled into every executable
# through the sanitizers' __<tool>_default_options hooks, so that `ctest` run by hand, gtest's test
# discovery at build time, and workers started by mpirun or dsrun all get them without an
# environment. ASAN_OPTIONS/UBSAN_OPTIONS/LSAN_OPTIONS/TSAN_OPTIONS still add to or override them.
add_library(ds_sanitizer_defaults OBJECT ${PROJECT_SOURCE_DIR}/scripts/sanitizers/default_options.c)
target_compile_definitions(ds_sanitizer_defaults PRIVATE
  DS_SANITIZER_DIR="${PROJECT_SOURCE_DIR}/scripts/sanitizers")
# BUILD_INTERFACE: the hooks are for the executables of this build; the installed engine library's
# export set (cmake/install.cmake) must not name a target that is not installed.
link_libraries($<BUILD_INTERFACE:ds_sanitizer_defaults>)
