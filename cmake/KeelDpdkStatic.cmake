# Static DPDK for cross builds (included by KeelDpdk.cmake when
# CMAKE_CROSSCOMPILING). Links DPDK and its dependencies from the arm64 sysroot
# that toolchains/arm64-sysroot.sh unpacks (KEEL_ARM64_SYSROOT).
#
# Link line, in this order (see docs/QEMU.md, "A static aarch64 DPDK binary"):
#   1. drivers, whole-archived: each registers itself from a constructor, which
#      nothing references, so a plain archive link would drop it.
#        KEEL_DPDK_DRIVERS   bus_vdev net_null net_pcap net_ring net_tap mempool_ring
#        KEEL_DPDK_MLX5=ON   + net_mlx5 common_mlx5 bus_pci bus_auxiliary and
#                              rdma-core's libmlx5.a (its constructor registers
#                              the verbs provider)
#      plus hal/dpdk_static_stubs.c (sd_listen_fds, sd_is_socket);
#   2. one --start-group/--end-group of the DPDK libraries (KEEL_DPDK_LIBS) and
#      the static third-party libraries: libibverbs libnl-route-3 libnl-3 (mlx5),
#      libpcap libdbus-1 libnuma libfdt libbsd libmd;
#   3. -latomic -lpthread -lm -ldl -lrt.
# `pkg-config --static libdpdk` is not used: it whole-archives every driver.
#
# Sets KEEL_HAVE_DPDK (in the including scope) and the INTERFACE target
# keel_dpdk_deps, which also carries KEEL_DPDK_STATIC=1 and
# KEEL_DPDK_WITH_MLX5=0/1.

set(_keel_sr "${KEEL_ARM64_SYSROOT}")
set(_keel_libdirs "${_keel_sr}/usr/lib/aarch64-linux-gnu" "${_keel_sr}/lib/aarch64-linux-gnu")
set(_keel_dpdk_inc "${_keel_sr}/usr/include/dpdk")
set(_keel_dpdk_arch_inc "${_keel_sr}/usr/include/aarch64-linux-gnu/dpdk")

if(NOT _keel_sr OR NOT EXISTS "${_keel_sr}/usr/lib/aarch64-linux-gnu/librte_eal.a"
   OR NOT EXISTS "${_keel_dpdk_arch_inc}/rte_config.h")
  message(WARNING "keel: no static arm64 DPDK in KEEL_ARM64_SYSROOT='${_keel_sr}'; "
                 "the DPDK backend is off. Build the sysroot with: "
                 "toolchains/arm64-sysroot.sh ${_keel_sr}  (then re-run cmake)")
  return()
endif()

# Path of lib<name>.a in the sysroot, or empty.
function(_keel_static_lib out name)
  set(${out} "" PARENT_SCOPE)
  foreach(d ${_keel_libdirs})
    if(EXISTS "${d}/lib${name}.a")
      set(${out} "${d}/lib${name}.a" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# Imported target keel_static::<name> for lib<name>.a; FATAL_ERROR if absent.
function(_keel_import_static name)
  if(TARGET keel_static::${name})
    return()
  endif()
  _keel_static_lib(path ${name})
  if(NOT path)
    message(FATAL_ERROR "keel: lib${name}.a is missing from the arm64 sysroot ${_keel_sr} "
                        "(re-run toolchains/arm64-sysroot.sh)")
  endif()
  add_library(keel_static::${name} STATIC IMPORTED GLOBAL)
  set_target_properties(keel_static::${name} PROPERTIES IMPORTED_LOCATION "${path}")
endfunction()

set(KEEL_DPDK_DRIVERS "bus_vdev;net_null;net_pcap;net_ring;net_tap;mempool_ring" CACHE STRING
    "DPDK drivers linked (whole-archived) into static builds, librte_<name>.a")
set(KEEL_DPDK_LIBS
    "ethdev;net;mbuf;mempool;ring;meter;pci;bus_pci;eal;telemetry;kvargs;rcu;hash;gso;gro;ip_frag;timer;metrics;pcapng"
    CACHE STRING "DPDK libraries available to static builds (linked as a group, only what is used)")
mark_as_advanced(KEEL_DPDK_DRIVERS KEEL_DPDK_LIBS)

# mlx5 (BlueField): DPDK's mlx5 PMD plus rdma-core's static provider and verbs.
set(_keel_mlx5_drivers net_mlx5 common_mlx5 bus_pci bus_auxiliary)
set(_keel_mlx5_libs ibverbs nl-route-3 nl-3)
set(_keel_mlx5_available ON)
foreach(n ${_keel_mlx5_drivers})
  _keel_static_lib(p rte_${n})
  if(NOT p)
    set(_keel_mlx5_available OFF)
  endif()
endforeach()
foreach(n mlx5 ${_keel_mlx5_libs})
  _keel_static_lib(p ${n})
  if(NOT p)
    set(_keel_mlx5_available OFF)
  endif()
endforeach()
option(KEEL_DPDK_MLX5 "Link DPDK's mlx5 driver and rdma-core statically (BlueField boards)"
       ${_keel_mlx5_available})
if(KEEL_DPDK_MLX5 AND NOT _keel_mlx5_available)
  message(FATAL_ERROR "keel: KEEL_DPDK_MLX5=ON but the sysroot lacks librte_net_mlx5.a / "
                      "libmlx5.a / libibverbs.a / libnl-3.a (re-run toolchains/arm64-sysroot.sh)")
endif()

set(_keel_drivers ${KEEL_DPDK_DRIVERS})
set(_keel_extra_whole "")
set(_keel_extra_group "")
if(KEEL_DPDK_MLX5)
  list(APPEND _keel_drivers ${_keel_mlx5_drivers})
  _keel_import_static(mlx5)
  list(APPEND _keel_extra_whole keel_static::mlx5)
  list(APPEND _keel_extra_group ${_keel_mlx5_libs})
endif()
list(REMOVE_DUPLICATES _keel_drivers)
set(_keel_libs ${KEEL_DPDK_LIBS})
list(REMOVE_ITEM _keel_libs ${_keel_drivers})   # a library is whole-archived or grouped, not both
list(APPEND _keel_extra_group pcap dbus-1 numa fdt bsd md)

set(_keel_whole "")
foreach(n ${_keel_drivers})
  _keel_import_static(rte_${n})
  list(APPEND _keel_whole keel_static::rte_${n})
endforeach()
list(APPEND _keel_whole ${_keel_extra_whole})

set(_keel_group "")
foreach(n ${_keel_libs})
  _keel_import_static(rte_${n})
  list(APPEND _keel_group keel_static::rte_${n})
endforeach()
foreach(n ${_keel_extra_group})
  _keel_import_static(${n})
  list(APPEND _keel_group keel_static::${n})
endforeach()

# libpcap/libdbus reference libsystemd's socket activation; Debian has no
# static libsystemd.
add_library(keel_dpdk_static_stubs STATIC ${CMAKE_CURRENT_LIST_DIR}/../hal/dpdk_static_stubs.c)

add_library(keel_dpdk_deps INTERFACE)
target_include_directories(keel_dpdk_deps SYSTEM INTERFACE
  "${_keel_dpdk_arch_inc}" "${_keel_dpdk_inc}"
  "${_keel_sr}/usr/include")   # <bsd/string.h> (RTE_USE_LIBBSD), <infiniband/...>
target_compile_options(keel_dpdk_deps INTERFACE "SHELL:-include rte_config.h")
if(KEEL_DPDK_MLX5)
  target_compile_definitions(keel_dpdk_deps INTERFACE KEEL_DPDK_STATIC=1 KEEL_DPDK_WITH_MLX5=1)
else()
  target_compile_definitions(keel_dpdk_deps INTERFACE KEEL_DPDK_STATIC=1 KEEL_DPDK_WITH_MLX5=0)
endif()
list(JOIN _keel_whole "," _keel_whole_csv)
list(JOIN _keel_group "," _keel_group_csv)
target_link_libraries(keel_dpdk_deps INTERFACE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_keel_whole_csv},keel_dpdk_static_stubs>"
  "$<LINK_GROUP:RESCAN,${_keel_group_csv}>"
  atomic pthread m dl rt)

set(KEEL_HAVE_DPDK ON)
string(REPLACE ";" " " _keel_msg_drivers "${_keel_drivers}")
message(STATUS "keel: static DPDK from ${_keel_sr}: drivers ${_keel_msg_drivers}")
if(KEEL_DPDK_MLX5)
  message(STATUS "keel: mlx5 with rdma-core static libmlx5.a/libibverbs.a (KEEL_DPDK_MLX5=ON)")
endif()
