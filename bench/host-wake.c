// What a thread's wake-up costs on this host, with nothing else to do: a thread that sleeps to the
// next multiple of a period (clock_nanosleep, as giul's sampler does between reads) and at once
// sleeps again. Its own CPU time per wake, and as a share of one core, is the least any periodic
// thread can cost here, the sampler included (bench/RESULTS.md, issue 12's idle CPU).
//
//   cc -O2 -o host-wake bench/host-wake.c
//   ./host-wake [period µs, default 5000] [seconds, default 5]
//
// Prints one line: the period, the wakes, the thread's CPU µs per wake and % of one core.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double micros(const struct timespec* a, const struct timespec* b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

int main(int argc, char** argv) {
  const long period_us = argc > 1 ? atol(argv[1]) : 5000;
  const long seconds = argc > 2 ? atol(argv[2]) : 5;
  if (period_us <= 0 || seconds <= 0) {
    fprintf(stderr, "usage: host-wake [period µs > 0] [seconds > 0]\n");
    return 1;
  }
  struct timespec start, cpu0, cpu1, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  struct timespec next = start;
  long wakes = 0;
  for (;;) {
    next.tv_nsec += period_us * 1000;
    while (next.tv_nsec >= 1000000000) {
      next.tv_nsec -= 1000000000;
      next.tv_sec += 1;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    wakes += 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (micros(&start, &now) >= (double)seconds * 1e6) break;
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  const double cpu_us = micros(&cpu0, &cpu1);
  printf("period %ld us: %ld wakes, %.1f us of CPU per wake, %.3f %% of one core\n", period_us,
         wakes, cpu_us / (double)wakes, cpu_us / ((double)seconds * 1e4));
  return 0;
}
