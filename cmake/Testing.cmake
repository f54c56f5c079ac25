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
