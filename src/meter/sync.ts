/**
 * A window's `sync` hook (MeterOptions.sync), awaited before its closing edge and bounded by
 * `syncTimeoutMs`: the edge is taken either way, and the window says why its card's work may not
 * have been finished.
 */

const TIMED_OUT: unique symbol = Symbol("timed out");

/** Runs `sync` within `timeoutMs`: null when it finished, else why the window cannot rely on it. */
export async function runSyncHook(sync: () => unknown, timeoutMs: number): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((done) => {
    timer = setTimeout(() => done(TIMED_OUT), timeoutMs);
  });
  try {
    const outcome = await Promise.race([Promise.resolve().then(sync), timedOut]);
    if (outcome !== TIMED_OUT) return null;
    return (
      `the sync hook did not finish within syncTimeoutMs (${timeoutMs} ms): the closing ` +
      "edge was taken without it, so the card's work may not be finished"
    );
  } catch (error) {
    return `the sync hook failed, so the card's work may not be finished: ${String(error)}`;
  } finally {
    clearTimeout(timer);
  }
}

declare global {
  interface SymbolConstructor {
    /**
     * `await using` support (Meter[Symbol.asyncDispose]). Declared here as @types/node and
     * TypeScript's esnext.disposable library declare it, so that giul's types check in a project
     * that has neither.
     */
    readonly asyncDispose: unique symbol;
  }
}

/** The symbol `await using` calls at the end of its block. */
export const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);
