# DPDK for the hal/dpdk backend.
#
# Native builds use the system's libdpdk through pkg-config (shared libraries;
# the EAL loads its drivers as plugins). Cross builds for aarch64 link DPDK
# statically from the sysroot that toolchains/arm64-sysroot.sh builds, with an
# explicit list of drivers (see cmake/KeelDpdkStatic.cmake): pkg-config
# --static would whole-archive every driver.
#
# Result: KEEL_HAVE_DPDK, and the INTERFACE target keel_dpdk_deps.

set(KEEL_HAVE_DPDK OFF)
if(KEEL_DPDK STREQUAL "OFF")
  return()
endif()

if(CMAKE_CROSSCOMPILING)
  include(${CMAKE_CURRENT_LIST_DIR}/KeelDpdkStatic.cmake)
else()
  find_package(PkgConfig)
  if(PkgConfig_FOUND)
    pkg_check_modules(DPDK IMPORTED_TARGET libdpdk)
  endif()
  if(DPDK_FOUND)
    add_library(keel_dpdk_deps INTERFACE)
    target_link_libraries(keel_dpdk_deps INTERFACE PkgConfig::DPDK)
    set(KEEL_HAVE_DPDK ON)
  endif()
endif()

if(NOT KEEL_HAVE_DPDK AND KEEL_DPDK STREQUAL "ON")
  message(FATAL_ERROR "KEEL_DPDK=ON but DPDK was not found (run toolchains/setup.sh)")
endif()
message(STATUS "keel: DPDK backend ${KEEL_HAVE_DPDK}")
