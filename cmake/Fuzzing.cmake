# Fuzz targets (libFuzzer) and their corpus replays.
#
# Each target is one source file with LLVMFuzzerTestOneInput, kept in a fuzz/ folder beside the code
# it tests, with two corpus folders per target <name>_fuzz: corpus/<name>/ (seeds) and
# regressions/<name>/ (reproducers of fixed bugs).
#
# - Every build (g++ included) links each target with cmake/fuzz/replay_main.cpp into
#   build/tests/<target>_replay, and ctest runs it over both folders as `fuzz_replay.<target>`
#   (label unit), so every fixed bug stays fixed.
# - With -DDS_FUZZ=ON (clang only) the libraries are built with coverage instrumentation and
#   ASan+UBSan, and each target is also linked with libFuzzer into build/bin/<target>.
#   `cmake --build <dir> --target fuzz` builds just those; scripts/fuzz.sh TARGET SECONDS runs one.
#
# Included from the top CMakeLists.txt before the subdirectories (the flags must apply to the
# libraries); the targets themselves are defined once every subdirectory has been read.
option(DS_FUZZ "Build the libFuzzer targets (needs clang) with ASan+UBSan" OFF)

if(DS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DS_FUZZ=ON needs clang (libFuzzer is part of clang), but the C++ compiler is "
                        "${CMAKE_CXX_COMPILER_ID}; configure a fresh build folder with "
                        "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does)")
  endif()
  if(DS_SANITIZE)
    message(FATAL_ERROR "DS_FUZZ=ON brings its own sanitizers (ASan+UBSan); leave DS_SANITIZE empty")
  endif()
  message(STATUS "DS_FUZZ=ON: libFuzzer targets with ASan+UBSan")
  set(DS_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(-fsanitize=fuzzer-no-link ${DS_FUZZ_FLAGS})
  add_compile_definitions(DS_SANITIZE_ADDRESS=1)  # as a DS_SANITIZE=address build (cmake/Sanitizers.cmake)
  add_link_options(${DS_FUZZ_FLAGS})
  add_custom_target(fuzz)
endif()

# ds_add_fuzz_target(<name> DIR <fuzz folder> SOURCE <file> LIBS <libs...>)
# Records the target; it is defined after all subdirectories (the libraries must exist by then).
function(ds_add_fuzz_target name)
  cmake_parse_arguments(ARG "" "DIR;SOURCE" "LIBS" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY DS_FUZZ_TARGETS ${name})
  set_property(GLOBAL PROPERTY DS_FUZZ_${name}_DIR ${ARG_DIR})
  set_property(GLOBAL PROPERTY DS_FUZZ_${name}_SOURCE ${ARG_SOURCE})
  set_property(GLOBAL PROPERTY DS_FUZZ_${name}_LIBS ${ARG_LIBS})
endfunction()

function(ds_define_fuzz_targets)
  get_property(targets GLOBAL PROPERTY DS_FUZZ_TARGETS)
  foreach(name IN LISTS targets)
    get_property(rel GLOBAL PROPERTY DS_FUZZ_${name}_DIR)
    get_property(file GLOBAL PROPERTY DS_FUZZ_${name}_SOURCE)
    get_property(libs GLOBAL PROPERTY DS_FUZZ_${name}_LIBS)
    set(dir ${PROJECT_SOURCE_DIR}/${rel})
    set(src ${dir}/${file})
    set(missing "")
    foreach(lib IN LISTS libs)
      if(NOT TARGET ${lib})
        set(missing ${lib})
      endif()
    endforeach()
    if(missing)
      message(STATUS "fuzz target ${name}: skipped, library ${missing} is not built")
      continue()
    endif()

    if(NOT TARGET ds_fuzz_replay_main)
      # One object for every replay binary (it was compiled once per fuzz target).
      add_library(ds_fuzz_replay_main OBJECT ${PROJECT_SOURCE_DIR}/cmake/fuzz/replay_main.cpp)
    endif()
    add_executable(${name}_replay ${src} $<TARGET_OBJECTS:ds_fuzz_replay_main>)
    target_link_libraries(${name}_replay PRIVATE ${libs})
    set_target_properties(${name}_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    string(REGEX REPLACE "_fuzz$" "" short ${name})
    set(corpora ${dir}/corpus/${short})
    if(EXISTS ${dir}/regressions/${short})
      list(APPEND corpora ${dir}/regressions/${short})
    endif()
    add_test(NAME fuzz_replay.${name} COMMAND ${name}_replay ${corpora})
    set_tests_properties(fuzz_replay.${name} PROPERTIES LABELS unit TIMEOUT 120)

    if(DS_FUZZ)
      add_executable(${name} ${src})
      target_link_libraries(${name} PRIVATE ${libs})
      target_link_options(${name} PRIVATE -fsanitize=fuzzer)
      add_dependencies(fuzz ${name} ${name}_replay)
    endif()
  endforeach()
endfunction()

# Every fuzz target of the project, by folder.
ds_add_fuzz_target(store_server_fuzz DIR engine/store/fuzz SOURCE store_server_fuzz.cpp LIBS dsengine)
ds_add_fuzz_target(env_discovery_fuzz DIR engine/env/fuzz SOURCE env_discovery_fuzz.cpp LIBS dsengine)
ds_add_fuzz_target(slurm_lists_fuzz DIR engine/env/fuzz SOURCE slurm_lists_fuzz.cpp LIBS dsengine)
ds_add_fuzz_target(cuda_visible_fuzz DIR diag/fuzz SOURCE cuda_visible_fuzz.cpp LIBS dsdiaglib)
ds_add_fuzz_target(nccl_ifname_fuzz DIR diag/fuzz SOURCE nccl_ifname_fuzz.cpp LIBS dsdiaglib)
ds_add_fuzz_target(explain_fuzz DIR diag/fuzz SOURCE explain_fuzz.cpp LIBS dsdiaglib)
ds_add_fuzz_target(fr_dump_fuzz DIR diag/fuzz SOURCE fr_dump_fuzz.cpp LIBS dshang)
ds_add_fuzz_target(run_file_fuzz DIR reports/fuzz SOURCE run_file_fuzz.cpp LIBS dsreports)
ds_add_fuzz_target(nccl_tests_import_fuzz DIR reports/fuzz SOURCE nccl_tests_import_fuzz.cpp LIBS dsreports)

cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL ds_define_fuzz_targets)
