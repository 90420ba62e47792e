# Cross toolchain: aarch64 Linux with Debian's g++-aarch64-linux-gnu.
#
#   cmake --preset aarch64      (CMakePresets.json passes this file and
#                                -DKEEL_ARM64_SYSROOT=<repo>/build/arm64-sysroot)
#
# Every executable is linked statically (firmware and tests): no loader is
# involved under qemu-aarch64 (see docs: a dynamic binary under
# `qemu-aarch64 -L /usr/aarch64-linux-gnu` mixes two glibc builds and hangs in
# pthread_create), and the firmware ships as one file. ctest runs targets
# through CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64, from qemu-user).
#
# Libraries and headers (DPDK, rdma-core, mbedTLS, CLI11, doctest, ...) come
# from the arm64 sysroot that toolchains/arm64-sysroot.sh unpacks; libc and
# libstdc++ come from the cross toolchain itself (/usr/aarch64-linux-gnu). The
# host's /usr/include and /usr/lib are never searched.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER   aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The sysroot: a cache variable so the preset (or -D) can move it. The default
# is relative to this file, which also holds inside try_compile projects.
get_filename_component(_keel_default_sysroot "${CMAKE_CURRENT_LIST_DIR}/../build/arm64-sysroot" ABSOLUTE)
if(NOT KEEL_ARM64_SYSROOT)
  set(KEEL_ARM64_SYSROOT "${_keel_default_sysroot}" CACHE PATH
      "arm64 sysroot with DPDK static libraries (cross builds)" FORCE)
endif()
# try_compile projects re-read this file; hand them the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KEEL_ARM64_SYSROOT)
get_property(_keel_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)
get_property(_keel_warned GLOBAL PROPERTY _KEEL_SYSROOT_WARNED)   # this file is read several times
if(NOT _keel_in_try_compile AND NOT _keel_warned AND NOT EXISTS "${KEEL_ARM64_SYSROOT}/.keel-sysroot-stamp")
  set_property(GLOBAL PROPERTY _KEEL_SYSROOT_WARNED TRUE)
  message(WARNING "KEEL_ARM64_SYSROOT='${KEEL_ARM64_SYSROOT}' is not an arm64 sysroot yet: "
                  "CLI11, doctest, mbedTLS and DPDK for aarch64 come from it. Build it with "
                  "toolchains/arm64-sysroot.sh (or toolchains/setup.sh), then re-run cmake.")
endif()

set(CMAKE_FIND_ROOT_PATH "${KEEL_ARM64_SYSROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # build tools run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Everything is linked statically, so find_library should only ever pick
# archives (the sysroot's .so files are dangling links to packages it lacks).
set(CMAKE_FIND_LIBRARY_SUFFIXES .a)

# Static executables everywhere.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# ctest: add_test(NAME x COMMAND <target>) runs `qemu-aarch64 <binary>`.
# Static binaries need no -L (and -L would redirect the guest's file lookups).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

# pkg-config, if anything asks it, answers from the sysroot.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${KEEL_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${KEEL_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${KEEL_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
