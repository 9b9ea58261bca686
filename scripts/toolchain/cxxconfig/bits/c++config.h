// libstdc++'s configuration, as the host's GCC was built (against a current glibc), minus what the
// prebuilds' sysroot (glibc 2.17) lacks. This folder comes first on the include path of a build
// with scripts/toolchain/linux-*.cmake; nothing else includes it.
#include_next <bits/c++config.h>

// pthread_cond_clockwait, pthread_mutex_clocklock and pthread_rwlock_clock*lock are glibc 2.30.
// Without them <condition_variable>, <mutex> and <shared_mutex> wait on CLOCK_REALTIME deadlines
// converted from steady_clock, as libstdc++ does on any glibc older than 2.30.
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT
#undef _GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK
#undef _GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK
