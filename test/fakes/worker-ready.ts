/** What waiting for the accounting worker reads of its client (src/offload/client.ts OffloadClient). */
export interface Readiness {
  readonly ready: boolean;
}

/** Waits until `client` says its worker is ready, up to 10 s (null: returns at once). */
export async function untilReady(client: Readiness | null | undefined): Promise<void> {
  for (let waited = 0; client != null && !client.ready && waited < 10_000; waited += 20) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Under GIUL_ACCOUNTING=worker (`npm run test:worker`): waits until the accounting worker says it
 * is ready (up to 10 s), so that the windows a suite opens next are the worker's, not its own
 * thread's (windows opened before the worker is ready are accounted where they are). Elsewhere it
 * does nothing. Call it after a first window has started the worker, in the module graph the
 * suite's windows use (its src/ imports).
 */
export async function workerReadyIfAsked(): Promise<void> {
  if (process.env.GIUL_ACCOUNTING !== "worker") return;
  const { offloadClient } = await import("../../src/offload/client.js");
  const client = offloadClient();
  await untilReady(client);
  if (client?.ready !== true) {
    throw new Error("GIUL_ACCOUNTING=worker, but the accounting worker did not become ready within 10 s");
  }
}
