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
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnccl2, libcublas12, python3-torch")

include(CPack)
