# Optional dependencies: DS_WITH_<X> is AUTO (found -> ON, missing -> OFF with one line), ON (required)
# or OFF (not used even if present).
set(DS_WITH_CUDA AUTO CACHE STRING "Build CUDA support: AUTO, ON or OFF")
set(DS_WITH_NCCL AUTO CACHE STRING "Build the NCCL backend: AUTO, ON or OFF")
set(DS_WITH_MPI AUTO CACHE STRING "Build MPI support: AUTO, ON or OFF")
set(DS_WITH_GLOO AUTO CACHE STRING "Build the Gloo backend: AUTO, ON or OFF")
foreach(opt DS_WITH_CUDA DS_WITH_NCCL DS_WITH_MPI DS_WITH_GLOO)
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
endforeach()

# ds_resolve_option(<opt> <found> <what is missing>) turns AUTO into ON/OFF in DS_<opt>_ENABLED.
function(ds_resolve_option opt found why)
  string(TOUPPER "${${opt}}" mode)
  if(mode STREQUAL "OFF")
    set(${opt}_ENABLED OFF PARENT_SCOPE)
    message(STATUS "${opt}=OFF: disabled by request")
  elseif(found)
    set(${opt}_ENABLED ON PARENT_SCOPE)
    message(STATUS "${opt}=ON")
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "${opt}=ON but ${why}")
  else()
    set(${opt}_ENABLED OFF PARENT_SCOPE)
    message(STATUS "${opt}=OFF: ${why}")
  endif()
endfunction()

find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
# Every nlohmann::json exception names the RFC 6901 pointer of the value it is about ("(/results/3/
# bus_bw) type must be number, but is string"); reports/json_io.h jsonFieldError turns that into
# "run.json: at /results/3/bus_bw: expected a number, found ...". The library does it by keeping a
# parent pointer in every value (8 bytes more per value, a little time per copy), so no reader has to
# track paths by hand. Set for every target: since 3.11 the setting is part of the ABI namespace
# (json_abi_diag_v3_11_2), so a file built without it could not exchange a json with the others.
# (3.11.2 leaves parent pointers stale after object insert(first, last) and update(j, true), which
# assert in builds without NDEBUG; the code uses neither.)
add_compile_definitions(JSON_DIAGNOSTICS=1)
# dsreport's rules files (reports/baseline/rules.h) are YAML, as superbench's rules are: operators
# edit them by hand, with comments. yaml-cpp reports line and column of every node for our errors.
find_package(yaml-cpp REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)

# --- CUDA (from /usr/local/cuda when present) -------------------------------------------------
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
set(_cuda_found FALSE)
string(TOUPPER "${DS_WITH_CUDA}" _cuda_mode)
if(NOT _cuda_mode STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  set(_cuda_found ${CUDAToolkit_FOUND})
endif()
ds_resolve_option(DS_WITH_CUDA "${_cuda_found}" "no CUDA toolkit was found (looked in /usr/local/cuda and PATH)")
if(DS_WITH_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (default sm_90)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS ${CUDAToolkit_BIN_DIR}/nvcc)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_BIN_DIR}/nvcc)
  endif()
  enable_language(CUDA)
endif()

# --- NCCL (ships with the CUDA toolkit here) --------------------------------------------------
set(_nccl_found FALSE)
if(DS_WITH_CUDA_ENABLED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found TRUE)
  endif()
  set(_nccl_why "nccl.h or libnccl was not found next to the CUDA toolkit")
else()
  set(_nccl_why "NCCL needs CUDA, and CUDA is off")
endif()
ds_resolve_option(DS_WITH_NCCL "${_nccl_found}" "${_nccl_why}")

# --- Libraries opened at run time -----------------------------------------------------------------
# dsbench opens libnccl and libcublas with dlopen on its first GPU use instead of linking them
# (engine/common/shared_library.h: linked, they cost every start 0.2-0.4 s of mapping and relocation).
# Their sonames come from the headers built against; ldd does not list them, so they are also written to
# build/dlopen-libs, from which scripts/bundle.sh adds them to the libraries the node must provide.
# ds_header_define(<var> <header> <macro>): the number a header #defines.
function(ds_header_define var header macro)
  file(STRINGS "${header}" line REGEX "^#define ${macro} +[0-9]+")
  string(REGEX MATCH "[0-9]+$" value "${line}")
  if(value STREQUAL "")
    message(FATAL_ERROR "${header} does not #define ${macro}")
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()
set(_dlopen_libs "")
if(DS_WITH_CUDA_ENABLED)
  find_file(DS_CUBLAS_API_H cublas_api.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  ds_header_define(_cublas_major "${DS_CUBLAS_API_H}" CUBLAS_VER_MAJOR)
  set(DS_CUBLAS_SONAME "libcublas.so.${_cublas_major}")
  list(APPEND _dlopen_libs ${DS_CUBLAS_SONAME} "libcublasLt.so.${_cublas_major}")
endif()
if(DS_WITH_NCCL_ENABLED)
  ds_header_define(_nccl_major "${NCCL_INCLUDE_DIR}/nccl.h" NCCL_MAJOR)
  set(DS_NCCL_SONAME "libnccl.so.${_nccl_major}")
  list(APPEND _dlopen_libs ${DS_NCCL_SONAME})
endif()
set(_dlopen_text "")
foreach(lib IN LISTS _dlopen_libs)
  string(APPEND _dlopen_text "${lib}\n")
endforeach()
file(WRITE "${CMAKE_BINARY_DIR}/dlopen-libs" "${_dlopen_text}")

# --- MPI ----------------------------------------------------------------------------------------
set(_mpi_found FALSE)
string(TOUPPER "${DS_WITH_MPI}" _mpi_mode)
if(NOT _mpi_mode STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  set(_mpi_found ${MPI_CXX_FOUND})
endif()
ds_resolve_option(DS_WITH_MPI "${_mpi_found}" "no MPI was found (apt-get install libopenmpi-dev openmpi-bin)")
if(DS_WITH_MPI_ENABLED)
  find_program(DS_MPIRUN NAMES mpirun mpiexec HINTS ${MPI_HOME}/bin)
  # Open MPI derives its install prefix from the path it was started by; /bin/mpirun (usr-merge)
  # gives the prefix "/" and a fatal error, so use the real path.
  if(DS_MPIRUN)
    get_filename_component(DS_MPIRUN "${DS_MPIRUN}" REALPATH)
  endif()
endif()

# --- Gloo ----------------------------------------------------------------------------------------
set(_gloo_found FALSE)
string(TOUPPER "${DS_WITH_GLOO}" _gloo_mode)
if(NOT _gloo_mode STREQUAL "OFF")
  find_package(Gloo QUIET)
  set(_gloo_found ${Gloo_FOUND})
endif()
ds_resolve_option(DS_WITH_GLOO "${_gloo_found}" "Gloo was not found (apt-get install libgloo-dev)")
