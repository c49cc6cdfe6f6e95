# tileops_install_system.cmake - runs at install time (cmake --install,
# CPack), included from the install(CODE) in the top CMakeLists.txt, which
# sets the TILEOPS_I_* variables. It installs what must know the prefix
# that is installed to, which may differ from the one configured
# (`cmake --install build --prefix /usr`):
#   - the config files, in the system folder /etc for the prefixes /usr and
#     /, else in PREFIX/etc (as GNUInstallDirs computes its FULL paths);
#   - the systemd units, generated from deploy/*.service.in with the paths
#     of that prefix, in systemd's unit folder when installing to /usr,
#     else in PREFIX/lib/systemd/system; sysusers.d and tmpfiles.d alike.
# file(INSTALL) adds $DESTDIR, so staged installs (CPack) work.

set(_p "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/+$" "" _p "${_p}")

# A GNUInstallDirs folder (relative, or absolute as given) under the prefix
# installed to; kind "system": /etc and /var for the prefixes / and /usr.
function(tileops_i_full out rel kind)
  if(IS_ABSOLUTE "${rel}")
    set(${out} "${rel}" PARENT_SCOPE)
  elseif(kind STREQUAL "system" AND (_p STREQUAL "/usr" OR _p STREQUAL ""))
    set(${out} "/${rel}" PARENT_SCOPE)
  else()
    set(${out} "${_p}/${rel}" PARENT_SCOPE)
  endif()
endfunction()

# systemd's own folder (from systemd.pc at configure time) for a system
# install, else one under the prefix that the operator links or copies.
function(tileops_i_systemd out system_dir rel)
  if(_p STREQUAL "/usr" AND system_dir)
    set(${out} "${system_dir}" PARENT_SCOPE)
  else()
    set(${out} "${_p}/${rel}" PARENT_SCOPE)
  endif()
endfunction()

tileops_i_full(TILEOPS_UNIT_SYSCONFDIR "${TILEOPS_I_SYSCONFDIR}" system)
tileops_i_full(TILEOPS_UNIT_LOCALSTATEDIR "${TILEOPS_I_LOCALSTATEDIR}" system)
tileops_i_full(TILEOPS_UNIT_SBINDIR "${TILEOPS_I_SBINDIR}" prefix)
tileops_i_full(TILEOPS_UNIT_DOCDIR "${TILEOPS_I_DOCDIR}" prefix)
tileops_i_systemd(_unitdir "${TILEOPS_I_SYSTEMD_UNITDIR}" lib/systemd/system)
tileops_i_systemd(_sysusersdir "${TILEOPS_I_SYSUSERSDIR}" lib/sysusers.d)
tileops_i_systemd(_tmpfilesdir "${TILEOPS_I_TMPFILESDIR}" lib/tmpfiles.d)

file(INSTALL DESTINATION "${TILEOPS_UNIT_SYSCONFDIR}/tileops" TYPE FILE
  FILES ${TILEOPS_I_CONFIG_FILES})

set(_gen "${TILEOPS_I_BINARY_DIR}/install-units")
foreach(unit tileopsd.service tileopsd@.service)
  configure_file("${TILEOPS_I_SOURCE_DIR}/deploy/${unit}.in" "${_gen}/${unit}" @ONLY)
endforeach()
file(INSTALL DESTINATION "${_unitdir}" TYPE FILE
  FILES "${_gen}/tileopsd.service" "${_gen}/tileopsd@.service")
file(INSTALL DESTINATION "${_sysusersdir}" TYPE FILE
  FILES "${TILEOPS_I_SOURCE_DIR}/deploy/tileopsd.sysusers.conf" RENAME tileopsd.conf)
file(INSTALL DESTINATION "${_tmpfilesdir}" TYPE FILE
  FILES "${TILEOPS_I_SOURCE_DIR}/deploy/tileopsd.tmpfiles.conf" RENAME tileopsd.conf)
