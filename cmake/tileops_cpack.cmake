# tileops_cpack.cmake - the Debian packages, made by `cpack -G DEB` in a
# build folder configured with -DCMAKE_INSTALL_PREFIX=/usr (what
# scripts/test-install.sh does):
#   tileopsd         the daemon, the tools, the systemd units, sysusers.d and
#                    tmpfiles.d files, the config (conffiles in /etc/tileops),
#                    the manifest, the tuning table, man pages and docs;
#                    deploy/debian/ holds its maintainer scripts
#   libtileops0      the shared client library
#   libtileops-dev   tileops.h, libtileops.a, tileops.pc, the CMake package
# Run-time dependencies come from dpkg-shlibdeps (package dpkg-dev). The
# daemon and the tools link nng, libuv, protobuf-c, libyaml and, in CUDA
# builds, the CUDA runtime statically and load libcuda from the NVIDIA
# driver at run time, so tileopsd installs and runs its CPU backend where
# there is no CUDA toolkit or driver package.
set(CPACK_PACKAGE_NAME tileops)
set(CPACK_PACKAGE_VENDOR "TileOPs")
set(CPACK_PACKAGE_CONTACT "TileOPs maintainers <tileops@localhost>")
# Each package's description: its first line is the summary (no
# CPACK_PACKAGE_DESCRIPTION_SUMMARY, which CPack would put before it).
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
# Absolute install destinations (/etc, the systemd folders) land in the
# package only when the staging install uses DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS OFF)

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME tileopsd)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION misc)
# The user comes from systemd-sysusers when there is one, else adduser.
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "adduser | systemd")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
  "TileOPs daemon (tileopsd), its tools, systemd units and data
tileopsd owns a GPU (or runs every op on its CPU reference) and serves LLM
operators to local client processes linked with libtileops.")
# Packages install to /usr, so the config is in /etc (conffiles).
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/deploy/debian/conffiles
  ${CMAKE_SOURCE_DIR}/deploy/debian/postinst
  ${CMAKE_SOURCE_DIR}/deploy/debian/prerm
  ${CMAKE_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libtileops0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "TileOPs client library
libtileops talks to tileopsd over a local socket and shared memory.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtileops-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What linking the static archive needs (tileops.pc's Libs.private).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libtileops0 (= ${PROJECT_VERSION}), libnng-dev, libmbedtls-dev, libprotobuf-c-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "TileOPs client library: development files
tileops.h, the static libtileops.a, tileops.pc and the CMake package
(find_package(tileops): tileops::tileops, tileops::tileops_static).")

include(CPack)
