# `cpack` (in the build folder): a .deb and a .tar.gz of what cmake/install.cmake installs, to
# /usr in the .deb. scripts/tests/package_test.sh builds both, unpacks the .deb into an empty root,
# checks that every library the binaries load comes from a package in its Depends, and runs the tools
# from there.
set(CPACK_PACKAGE_NAME dsperf)
set(CPACK_PACKAGE_VENDOR "dsperf")
set(CPACK_PACKAGE_CONTACT "dsperf maintainers <dsperf@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Benchmarks and pre-flight checks for distributed training")
set(CPACK_PACKAGE_DESCRIPTION
    "dsperf measures and diagnoses distributed training jobs: dsdiag runs pre-flight checks (why a job\n"
    "would hang or crawl), dsbench runs collective sweeps with nccl-tests' flags and DDP training steps,\n"
    "dsreport writes HTML reports, compares runs and keeps a history, and dsrun is a torchrun-compatible\n"
    "launcher.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_INSTALL_DIRECTORY dsperf)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/;/build/;/build-.*/")
set(CPACK_PACKAGE_FILE_NAME "dsperf-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")

# Debian: Depends from the libraries the binaries link (dpkg-shlibdeps reads them, so the list cannot
# drift from the build). NCCL and cuBLAS are opened at run time only on GPU nodes (dlopen: the
# binaries start and run their CPU paths without them), and come from NVIDIA's repository or the CUDA
# toolkit: Suggests. python3 runs dsperf-gpu-checks' JSON queries; python3-torch its torch peer.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
# What the linked libraries do not show. Open MPI's libmpi (a shlibdeps Depends) cannot start a rank by
# itself: a rank started without mpirun (dsrun, torchrun, srun without PMIx, `dsbench coll --backend
# mpi` alone) is an Open MPI "singleton", which execs `orted` and reads its help files; those come with
# openmpi-bin and openmpi-common. Without them MPI_Init ends the process with "ORTE_ERROR_LOG: A
# system-required executable either could not be found" (seen on a clean Debian 12 root). mpirun is in
# openmpi-bin too.
if(DS_WITH_MPI_ENABLED)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, openmpi-common")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnccl2, libcublas12, python3-torch")

# The tarball has no package manager to pull its libraries: packaging/tarball/README, at the top of
# the .tar.gz only, says which Debian 12 packages a node needs (the .deb's Depends, by name). The
# `package` test checks that it names every package of the .deb's Depends; the `cleannode` test runs
# its apt-get line on a fresh minbase root and the tools after it.
set(CPACK_DS_TARBALL_README_DIR ${PROJECT_SOURCE_DIR}/packaging/tarball)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/CPackProjectConfig.cmake)

include(CPack)
