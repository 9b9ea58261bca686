# The linux-arm64 prebuild: aarch64 (Grace Hopper, Jetson), glibc 2.17 sysroot, built with Debian's
# cross GCC (g++-aarch64-linux-gnu); see glibc-floor.cmake.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(GIUL_GNU_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/glibc-floor.cmake)
