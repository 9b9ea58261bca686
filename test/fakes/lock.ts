import { mkdirSync, rmdirSync, statSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Runs `fn` holding the lock folder `lock` (mkdir is atomic), so that vitest runs or suites started
 * at the same time in one checkout wait for one build instead of making two at once. A lock older
 * than `staleMs` is taken to be left by a run that died; waiting longer than that throws.
 */
export async function withLock<T>(lock: string, staleMs: number, fn: () => T): Promise<T> {
  mkdirSync(dirname(lock), { recursive: true });
  const deadline = Date.now() + staleMs;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > staleMs) rmdirSync(lock);
      } catch {
        // gone already
      }
      if (Date.now() > deadline) throw new Error(`${lock} is held; remove it if nothing is building`);
      await new Promise((done) => setTimeout(done, 500));
    }
  }
  try {
    return fn();
  } finally {
    rmdirSync(lock);
  }
}
