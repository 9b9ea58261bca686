# The prebuilds' toolchain: the build host's GCC (C++20), compiling and linking against an old glibc
# sysroot instead of the host's own, so that the addon loads on any glibc from the sysroot's on
# (napi-rs's cross-toolchain packages: glibc 2.17, fetched by scripts/npm-tool.cjs).
#
# Included by linux-x64.cmake and linux-arm64.cmake after they set GIUL_GNU_TRIPLE (the triple of
# Debian's gcc for the target: x86_64-linux-gnu, aarch64-linux-gnu). GIUL_SYSROOT (a -D or the
# environment) is the sysroot. scripts/prebuildify-gyp.cjs passes both when `npm run prebuild` runs.
#
# What the sysroot alone does not settle, and how:
# - GCC searches the host's C headers (a cross GCC: its own glibc's) before the sysroot's; the
#   search path is rebuilt here with -nostdinc: libstdc++'s and GCC's own headers, then the
#   sysroot's, never the host's glibc headers.
# - libstdc++'s headers were configured for a newer glibc: cxxconfig/ overrides the few settings
#   that would call functions glibc 2.17 lacks.
# - libstdc++ and libgcc are the host GCC's: libstdc++ is linked statically into the addon (so it
#   needs no GLIBCXX_ version of the machine it runs on), with glibc-compat.c for the three glibc
#   symbols its objects refer to; libgcc stays the system's libgcc_s.so.1 (present wherever glibc
#   is), because GCC 12's static unwinder calls _dl_find_object (glibc 2.35). Both are set on the
#   addon target by CMakeLists.txt when GIUL_PORTABLE is on.
# - Libraries are looked up in the sysroot before the host's (-L), and libstdc++.a in GCC's own
#   folder before the sysroot's (which holds an old GCC's).
set(CMAKE_SYSTEM_NAME Linux)

if(NOT GIUL_SYSROOT)
  set(GIUL_SYSROOT "$ENV{GIUL_SYSROOT}")
endif()
if(NOT GIUL_SYSROOT OR NOT EXISTS "${GIUL_SYSROOT}/usr/include/stdio.h")
  message(FATAL_ERROR "GIUL_SYSROOT (${GIUL_SYSROOT}) is not a glibc sysroot: run `node scripts/npm-tool.cjs sysroot-<arch>` and pass its path")
endif()
# try_compile projects read this file again: hand them the sysroot.
set(ENV{GIUL_SYSROOT} "${GIUL_SYSROOT}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GIUL_SYSROOT GIUL_GNU_TRIPLE)

set(CMAKE_SYSROOT "${GIUL_SYSROOT}")
if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER ${GIUL_GNU_TRIPLE}-gcc)
endif()
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER ${GIUL_GNU_TRIPLE}-g++)
endif()

# GCC's own headers, and libstdc++'s as this GCC lists them.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=include
  OUTPUT_VARIABLE _giul_gcc_include OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _giul_rc)
if(NOT _giul_rc EQUAL 0)
  message(FATAL_ERROR "${CMAKE_CXX_COMPILER} did not run (install g++ for ${GIUL_GNU_TRIPLE})")
endif()
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -xc++ -E -v -o /dev/null /dev/null
  ERROR_VARIABLE _giul_search OUTPUT_QUIET)
string(REGEX MATCH "search starts here:\n(.*)\nEnd of search list" _giul_match "${_giul_search}")
string(REPLACE "\n" ";" _giul_dirs "${CMAKE_MATCH_1}")
set(_giul_cxx_includes "")
foreach(_giul_dir IN LISTS _giul_dirs)
  string(STRIP "${_giul_dir}" _giul_dir)
  if(_giul_dir MATCHES "/c\\+\\+/")
    list(APPEND _giul_cxx_includes "-isystem${_giul_dir}")
  endif()
endforeach()
if(NOT _giul_cxx_includes)
  message(FATAL_ERROR "could not find libstdc++'s headers in `${CMAKE_CXX_COMPILER} -v`:\n${_giul_search}")
endif()

# The include paths, as lists of single-word options (joined -isystemDIR: CMake de-duplicates
# options). CMakeLists.txt puts them first on every compile: cmake-js sets CMAKE_CXX_FLAGS itself,
# so CMAKE_<LANG>_FLAGS_INIT would be ignored.
set(GIUL_TOOLCHAIN_C_FLAGS -nostdinc "-isystem${_giul_gcc_include}" "-isystem${GIUL_SYSROOT}/usr/include")
set(GIUL_TOOLCHAIN_CXX_FLAGS -nostdinc "-isystem${CMAKE_CURRENT_LIST_DIR}/cxxconfig" ${_giul_cxx_includes}
  "-isystem${_giul_gcc_include}" "-isystem${GIUL_SYSROOT}/usr/include")

execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-libgcc-file-name
  OUTPUT_VARIABLE _giul_libgcc OUTPUT_STRIP_TRAILING_WHITESPACE)
get_filename_component(_giul_gcc_libdir "${_giul_libgcc}" DIRECTORY)
set(_giul_link "-B${GIUL_SYSROOT}/usr/lib64 -L${_giul_gcc_libdir} -L${GIUL_SYSROOT}/usr/lib64 -L${GIUL_SYSROOT}/lib64")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_giul_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_giul_link}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_giul_link}")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
