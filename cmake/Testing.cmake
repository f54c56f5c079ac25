# ds_add_gtest(<name> LABELS <labels...> SOURCES <files...> [LIBS <libs...>] [TIMEOUT <s>])
# One gtest binary; each TEST becomes its own ctest entry carrying the labels.
function(ds_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # Sanitized binaries run slower (engine/testing's timeScale(): 3 under ASan, 8 under TSan); the
  # ctest bound follows, so a slow test is not killed as hung. Assertions are unchanged.
  if(DS_SANITIZE STREQUAL "address")
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 3")
  elseif(DS_SANITIZE STREQUAL "thread")
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 8")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  # The tests' own sources compile at -O0; the code under test keeps its -O2 (-O1 in sanitizer
  # builds, cmake/Sanitizers.cmake, and instrumented either way). The test sources are half of a
  # build's compile time and -O0 takes 40 to 55 % off theirs (docs/dev/testing.md: CI's cold time).
  # The flag comes after the build type's, so it wins; other build types keep their own flags.
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${name} PRIVATE -O0)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${name} TEST_LIST ${name}_TESTS DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests flattens list-valued PROPERTIES (several labels, several variables), so the
  # properties are set by a file ctest reads after the discovered list. Flight recorder dumps of the
  # tests' process groups (a timeout dumps, as torch's) land in the build folder, not in ~/.cache.
  set(props "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake")
  file(WRITE "${props}" "foreach(t IN LISTS ${name}_TESTS)
  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${ARG_LABELS}\" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT \"DS_BIN_DIR=${CMAKE_BINARY_DIR}/bin;DS_TEST_DIR=${CMAKE_BINARY_DIR}/tests;TORCH_FR_DUMP_TEMP_FILE=${CMAKE_BINARY_DIR}/tests/fr-dumps/rank_\")
endforeach()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${props}")
endfunction()

# ds_test_paths(<target> <MACRO> <path> [<MACRO> <path> ...])
# Gives a test target macros that name files of the source tree or of the build folder, without the
# absolute path in its compile line: each MACRO becomes ds::testing::sourcePath("<path relative to the
# source tree>") or ds::testing::buildPath("<relative to the build folder>") (engine/testing/paths.h,
# which the files using the macro include), found when the test runs. An absolute -D path differs in
# every clone, so the compiler cache of a second clone missed every file of such a target.
function(ds_test_paths target)
  set(args ${ARGN})
  list(LENGTH args n)
  math(EXPR odd "${n} % 2")
  if(n EQUAL 0 OR odd)
    message(FATAL_ERROR "ds_test_paths(${target} ...) takes pairs of MACRO and path, got: ${args}")
  endif()
  while(args)
    list(POP_FRONT args name path)
    string(FIND "${path}/" "${CMAKE_BINARY_DIR}/" in_build)
    string(FIND "${path}/" "${PROJECT_SOURCE_DIR}/" in_source)
    if(in_build EQUAL 0)
      file(RELATIVE_PATH rel "${CMAKE_BINARY_DIR}" "${path}")
      set(call "ds::testing::buildPath(\"${rel}\")")
    elseif(in_source EQUAL 0)
      file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${path}")
      set(call "ds::testing::sourcePath(\"${rel}\")")
    else()
      message(FATAL_ERROR "ds_test_paths(${target}): ${name}=${path} is neither in the source tree "
                          "(${PROJECT_SOURCE_DIR}) nor in the build folder (${CMAKE_BINARY_DIR})")
    endif()
    target_compile_definitions(${target} PRIVATE "${name}=${call}")
  endwhile()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})  # for engine/testing/paths.h
endfunction()
