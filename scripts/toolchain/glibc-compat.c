// Linked into the prebuilt addon only (GIUL_PORTABLE). GCC's static libstdc++ was built against the
// build host's glibc, and a few of its objects refer to symbols that glibc 2.17 does not have. They
// are defined here, hidden, so the linker binds those references inside the addon and the addon
// needs nothing newer than its sysroot's glibc (scripts/check-prebuilds.cjs proves it: any
// reference left unversioned fails the check).
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_getrandom
#if defined(__x86_64__)
#define SYS_getrandom 318
#elif defined(__aarch64__)
#define SYS_getrandom 278
#else
#error "SYS_getrandom: unknown architecture"
#endif
#endif

#define GIUL_HIDDEN __attribute__((visibility("hidden")))

// glibc 2.32: "the process has one thread" lets libstdc++ skip atomic reference counting. Always
// false here: the atomic path, which is correct in every process.
GIUL_HIDDEN char __libc_single_threaded = 0;

// glibc 2.25; std::random_device's entropy source (the addon constructs none, but the object that
// defines it is linked). getrandom(2) is Linux 3.17.
GIUL_HIDDEN int getentropy(void* buffer, size_t length) {
  if (length > 256) {
    errno = EIO;
    return -1;
  }
  unsigned char* at = buffer;
  while (length > 0) {
    long got = syscall(SYS_getrandom, at, length, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    at += got;
    length -= (size_t)got;
  }
  return 0;
}

// glibc 2.36; std::random_device again.
GIUL_HIDDEN uint32_t arc4random(void) {
  uint32_t value;
  if (getentropy(&value, sizeof value) != 0) abort();
  return value;
}
