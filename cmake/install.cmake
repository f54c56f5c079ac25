# `cmake --install build --prefix DIR` (and the packages of cmake/Packaging.cmake): every install() rule
# of the tree is here, so that the module CMakeLists stay about building. The layout follows
# GNUInstallDirs:
#   bin/                      dsrun dsdiag dsbench dsreport, and dsperf-gpu-checks (run-gpu-checks.sh)
#   libexec/dsperf/           the GPU test binaries dsperf-gpu-checks runs (CUDA builds only)
#   share/dsperf/peers/       the torch peer scripts (run-gpu-checks' step h)
#   share/dsperf/             gpu_figures.py (run-gpu-checks' step i: figures.md from its JSON)
#   share/dsperf/schema/      the JSON Schemas of every file the tools write
#   share/dsperf/grafana/     dsperf-dashboard.json, a Grafana dashboard of dsreport export's gauges
#   share/dsperf/prometheus/  dsperf-alerts.yml, Prometheus alerting rules for the same gauges
#   share/man/man1/           one page per tool and subcommand (cmake/Manpages.cmake)
#   share/doc/dsperf/         README.md, CHANGELOG.md and docs/
#   lib/, include/dsperf/     libdsengine.a and its headers, with lib/cmake/dsperf/: find_package(dsperf)
#                             gives dsperf::dsengine
# Nothing installed refers to the build folder or to the prefix: the installed tree can be moved
# (scripts/tests/install_test.sh checks both).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DS_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/dsperf)
set(DS_INSTALL_LIBEXECDIR ${CMAKE_INSTALL_LIBEXECDIR}/dsperf)
set(DS_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/dsperf)
set(DS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dsperf)

install(TARGETS dsrun dsdiag dsbench dsreport RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/run-gpu-checks.sh DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME dsperf-gpu-checks COMPONENT tools)
foreach(t ds_nccl_gpu_tests ds_ddp_gpu_tests)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION ${DS_INSTALL_LIBEXECDIR} COMPONENT tools)
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scripts/bundle/peers/ DESTINATION ${DS_INSTALL_DATADIR}/peers
        COMPONENT tools FILES_MATCHING PATTERN "*.py")
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/bundle/gpu_figures.py DESTINATION ${DS_INSTALL_DATADIR}
        COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reports/schema/ DESTINATION ${DS_INSTALL_DATADIR}/schema COMPONENT tools
        FILES_MATCHING PATTERN "*.schema.json")
# The dashboard and the alerting rules for `dsreport export --openmetrics` (docs/fleet-health.md, 5).
install(FILES ${PROJECT_SOURCE_DIR}/reports/export/monitoring/dsperf-dashboard.json
        DESTINATION ${DS_INSTALL_DATADIR}/grafana COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/reports/export/monitoring/dsperf-alerts.yml
        DESTINATION ${DS_INSTALL_DATADIR}/prometheus COMPONENT tools)
if(DS_MAN_PAGES)
  install(FILES ${DS_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT tools
        PATTERN "dev" EXCLUDE)

# The engine library for programs that embed it: find_package(dsperf) then dsperf::dsengine. Its
# headers are included as "engine/<module>/<file>.h", as in the tree.
set_property(TARGET dsengine PROPERTY INTERFACE_INCLUDE_DIRECTORIES
             $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:${DS_INSTALL_INCLUDEDIR}>)
# A sanitizer build's engine is instrumented: a program that links it needs the sanitizers' run-time
# libraries, so the installed target asks for the same link flags (the build's own targets have them
# from add_link_options already).
if(DS_SANITIZE)
  target_link_options(dsengine INTERFACE $<INSTALL_INTERFACE:${DS_SANITIZE_FLAGS}>)
endif()
install(TARGETS dsengine EXPORT dsperfTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/engine/ DESTINATION ${DS_INSTALL_INCLUDEDIR}/engine COMPONENT dev
        FILES_MATCHING PATTERN "*.h"
        PATTERN "tests" EXCLUDE PATTERN "testing" EXCLUDE)
install(EXPORT dsperfTargets NAMESPACE dsperf:: DESTINATION ${DS_INSTALL_CMAKEDIR} COMPONENT dev)
# The config re-finds what dsengine links, with the options this build was configured with.
set(DS_CONFIG_WITH_MPI ${DS_WITH_MPI_ENABLED})
set(DS_CONFIG_WITH_GLOO ${DS_WITH_GLOO_ENABLED})
set(DS_CONFIG_WITH_CUDA ${DS_WITH_CUDA_ENABLED})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dsperfConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dsperfConfig.cmake INSTALL_DESTINATION ${DS_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dsperfConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dsperfConfig.cmake ${PROJECT_BINARY_DIR}/dsperfConfigVersion.cmake
        DESTINATION ${DS_INSTALL_CMAKEDIR} COMPONENT dev)
