# The linux-x64 prebuild: x86_64, glibc 2.17 sysroot (see glibc-floor.cmake).
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(GIUL_GNU_TRIPLE x86_64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/glibc-floor.cmake)
