# Man pages: one per tool and subcommand, made at build time from the tool's own --help by help2man
# (Debian's help2man; scripts/setup.sh installs it) plus the hand-written sections of
# docs/man/<page>.h2m. Installed to share/man/man1 (cmake/install.cmake); scripts/tests/man_test.sh
# renders every page with `man -l` and fails on any warning.
find_program(DS_HELP2MAN help2man)
set(DS_MAN_PAGES "")
if(DS_SANITIZE)
  # Sanitizer builds are for tests; their binaries' --help would also run under the sanitizers.
  message(STATUS "Man pages: not built in a sanitizer build (DS_SANITIZE=${DS_SANITIZE})")
  return()
endif()
if(NOT DS_HELP2MAN)
  message(STATUS "Man pages: not built, help2man was not found (apt-get install help2man)")
  return()
endif()
set(DS_MAN_DIR ${PROJECT_BINARY_DIR}/man/man1)
file(MAKE_DIRECTORY ${DS_MAN_DIR})
# page  tool  subcommand
set(_ds_man_list
    "dsrun;dsrun;" "dsdiag;dsdiag;"
    "dsbench;dsbench;" "dsbench-world;dsbench;world" "dsbench-coll;dsbench;coll" "dsbench-train;dsbench;train"
    "dsbench-gpu;dsbench;gpu"
    "dsreport;dsreport;" "dsreport-html;dsreport;html" "dsreport-compare;dsreport;compare"
    "dsreport-ingest;dsreport;ingest" "dsreport-import;dsreport;import" "dsreport-dashboard;dsreport;dashboard"
    "dsreport-export;dsreport;export" "dsreport-baseline;dsreport;baseline" "dsreport-check;dsreport;check")
set(_i 0)
list(LENGTH _ds_man_list _n)
while(_i LESS _n)
  list(GET _ds_man_list ${_i} _page)
  math(EXPR _i "${_i} + 1")
  list(GET _ds_man_list ${_i} _tool)
  math(EXPR _i "${_i} + 1")
  list(GET _ds_man_list ${_i} _sub)
  math(EXPR _i "${_i} + 1")
  set(_h2m ${PROJECT_SOURCE_DIR}/docs/man/${_page}.h2m)
  set(_out ${DS_MAN_DIR}/${_page}.1)
  add_custom_command(
    OUTPUT ${_out}
    COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/man/help2man.sh ${_out} ${PROJECT_VERSION} ${_h2m} $<TARGET_FILE:${_tool}> ${_sub}
    DEPENDS ${_tool} ${_h2m} ${PROJECT_SOURCE_DIR}/cmake/man/help2man.sh
    COMMENT "Man page ${_page}.1"
    VERBATIM)
  list(APPEND DS_MAN_PAGES ${_out})
endwhile()
add_custom_target(man ALL DEPENDS ${DS_MAN_PAGES})
