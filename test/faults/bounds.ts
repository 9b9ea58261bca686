/**
 * What the fault-matrix suite (test/faults/) holds the library to, and how it measures: every
 * duration with the monotonic clock (performance.now in this process, process.hrtime.bigint, i.e.
 * CLOCK_MONOTONIC, across processes). The bounds are the issue's; the slack on top is for a loaded
 * 2-core machine running other suites beside this one, not part of the promise.
 */

/** Slack on a bound measured inside one process (timer and scheduling delays on a busy machine). */
export const SLACK_MS = 400;
/** What a wait that should not happen at all may still take (the event loop, a busy machine). */
export const NO_WAIT_MS = 100;
/** The bound on a process's exit, whatever NVML or nvidia-smi is doing. */
export const EXIT_BOUND_MS = 200;

/** Runs `fn` and returns its value with how long it took (ms, monotonic). */
export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - t0 };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One line of the figures the suite measured, for the record (`[fault-matrix] …`). */
export function report(line: string): void {
  process.stdout.write(`[fault-matrix] ${line}\n`);
}
