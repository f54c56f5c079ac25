# Read by cpack once per generator (CPACK_PROJECT_CONFIG_FILE, cmake/Packaging.cmake): the tarball
# alone gets packaging/tarball/README at its top; the .deb has Depends instead.
if(CPACK_GENERATOR STREQUAL "TGZ")
  set(CPACK_INSTALLED_DIRECTORIES "${CPACK_DS_TARBALL_README_DIR};.")
endif()
