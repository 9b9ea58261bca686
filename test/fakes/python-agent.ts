/**
 * A minimal stand-in for the Python giul 0.2 agent: `GET /power` with exactly its fields (no
 * energy reading), everything else 404. Its watts are the scenario's true power at the instant
 * of the request, so a client's integral of them can be compared with the scenario's energy.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Scenario } from "./scenario.js";

export interface PythonAgent {
  readonly server: Server;
  readonly url: string;
  /** Requests to /power served so far. */
  readonly requests: () => number;
  close(): Promise<void>;
}

export async function startPythonAgent(sc: Scenario, device = 0): Promise<PythonAgent> {
  let count = 0;
  const server = createServer((req, res) => {
    if (req.method !== "GET" || req.url !== "/power") {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found\n");
      return;
    }
    count += 1;
    const body = JSON.stringify({
      watts: sc.powerW(device, process.hrtime.bigint()),
      name: "NVIDIA H100 80GB HBM3",
      memory_used_mib: 1024,
      memory_total_mib: 81559,
      memory_free_mib: 80535,
      utilization_pct: 37,
      compute_apps: [{ pid: 4242, used_mib: 1024, name: "python3" }],
    });
    // Python's http.server answers HTTP/1.0 and closes the connection.
    res.writeHead(200, { "content-type": "application/json", connection: "close" });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
