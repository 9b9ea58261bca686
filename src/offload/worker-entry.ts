/**
 * The accounting worker's entry (dist/offload-worker.js): ./worker.ts on this thread's port, with
 * the addon loaded and NVML initialised in this thread's environment.
 */
import { parentPort, workerData } from "node:worker_threads";
import { loadBinding } from "../binding.js";
import { runAccounting } from "./worker.js";

if (parentPort !== null) {
  const data = workerData as { readonly flags: SharedArrayBuffer };
  runAccounting({
    port: parentPort,
    flags: new Int32Array(data.flags),
    binding: async () => {
      const loaded = loadBinding();
      if (!loaded.ok) return loaded.reason;
      try {
        const init = await loaded.binding.nvmlInit({ keepAlive: true });
        return init.ok ? loaded.binding : `NVML did not start in the accounting worker: ${init.reason}`;
      } catch (error) {
        return `NVML did not start in the accounting worker: ${String(error)}`;
      }
    },
  });
}
