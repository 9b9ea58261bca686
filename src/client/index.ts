/**
 * giul/client: what a client of giul-proxy reads of each answer's energy, streamed or not, through
 * any fetch-based SDK (openai's `fetch` option) or plain `fetch`. No Node-only module, no addon.
 *
 * ```ts
 * import OpenAI from "openai";
 * import { energyFetch } from "giul/client";
 * const client = new OpenAI({ baseURL: "http://127.0.0.1:9410/v1", fetch: energyFetch({
 *   onEnergy: (e) => console.log(e.requestId, e.joules, e.method, e.uncertaintyJoules),
 * }) });
 * ```
 *
 * Where it comes from: a stream's `: energy {…}` comment (or its final usage chunk's
 * `usage.energy`); a JSON answer's `usage.energy` (giul-proxy --inject-usage) or its `x-energy-*`
 * headers. Every byte of the answer reaches the caller as it came.
 */
import type { ClientRecord } from "../proxy/record.js";
import type { Method } from "../rules/energy.js";
import { GiulError } from "../vocabulary/errors.js";
import { isMethod } from "../vocabulary/measurement.js";

export type { ClientRecord } from "../proxy/record.js";

/** One answer's energy as the client sees it. */
export interface AnswerEnergy {
  /** giul-proxy's id of the request (`x-energy-request-id`, the record's `request_id`). */
  readonly requestId: string | null;
  /** Joules above idle, or null where not known (never a 0 for "not measured"). */
  readonly joules: number | null;
  readonly method: Method;
  readonly backend: string;
  readonly uncertaintyJoules: number | null;
  /** The proxy's whole record (stages, cards, contention, …) where the answer carried it, else null. */
  readonly record: ClientRecord | null;
}

/**
 * `usage.energy` as giul-proxy adds it to an OpenAI `usage` object. For TypeScript users of an
 * SDK whose `usage` type does not know it: `(completion.usage as UsageWithEnergy).energy`.
 */
export interface UsageWithEnergy {
  readonly energy?: ClientRecord;
}

function isRecord(value: unknown): value is ClientRecord {
  if (typeof value !== "object" || value === null) return false;
  const r = value as Record<string, unknown>;
  return isMethod(r.method) && (r.joules === null || typeof r.joules === "number");
}

function fromRecord(record: ClientRecord): AnswerEnergy {
  return {
    requestId: typeof record.request_id === "string" ? record.request_id : null,
    joules: record.joules,
    method: record.method,
    backend: record.backend,
    uncertaintyJoules: record.uncertainty_joules ?? null,
    record,
  };
}

/** The record in an OpenAI `usage` object (`usage.energy`), or null where it has none. */
export function energyOfUsage(usage: unknown): ClientRecord | null {
  if (typeof usage !== "object" || usage === null) return null;
  const energy = (usage as UsageWithEnergy).energy;
  return isRecord(energy) ? energy : null;
}

/** What the `x-energy-*` fields of a response (or its trailers) say, or null where they are absent. */
export function energyOfHeaders(headers: Headers): AnswerEnergy | null {
  const method = headers.get("x-energy-method");
  if (!isMethod(method)) return null;
  const num = (name: string): number | null => {
    const raw = headers.get(name);
    const n = raw === null ? Number.NaN : Number(raw);
    return Number.isFinite(n) ? n : null;
  };
  return {
    requestId: headers.get("x-energy-request-id"),
    joules: num("x-energy-joules"),
    method: method as Method,
    backend: headers.get("x-energy-backend") ?? "none",
    uncertaintyJoules: num("x-energy-uncertainty-joules"),
    record: null,
  };
}

const COMMENT = ": energy ";

/** Reads SSE lines as they pass for the energy comment or a usage chunk's `usage.energy`. */
class StreamScan {
  found: ClientRecord | null = null;
  private readonly decoder = new TextDecoder();
  private line = "";

  push(bytes: Uint8Array): void {
    if (this.found !== null) return;
    const text = this.line + this.decoder.decode(bytes, { stream: true });
    const lines = text.split(/\r\n|\r|\n/);
    this.line = lines.pop() ?? "";
    // An unfinished line that can no longer be ours is dropped (a long data line is not kept).
    if (this.line.length > 1 << 20) this.line = "";
    for (const line of lines) {
      this.look(line);
      if (this.found !== null) return;
    }
  }

  private look(line: string): void {
    try {
      if (line.startsWith(COMMENT)) {
        const parsed: unknown = JSON.parse(line.slice(COMMENT.length));
        if (isRecord(parsed)) this.found = parsed;
      } else if (line.startsWith("data:") && line.includes('"energy"')) {
        this.found = energyOfUsage((JSON.parse(line.slice(5)) as { usage?: unknown }).usage);
      }
    } catch {
      // Not a line of ours.
    }
  }
}

/**
 * The response as it came (a stream's body passed through a reader that looks for the energy,
 * every byte unchanged), and its energy: known at once from the headers, after the body for a
 * JSON answer's `usage.energy`, or once the stream has been read to its energy comment (null
 * where the answer carried none: not through giul-proxy, or a stream not read to its end).
 */
export function watchEnergy(response: Response): {
  response: Response;
  energy: Promise<AnswerEnergy | null>;
} {
  const headed = energyOfHeaders(response.headers);
  const type = response.headers.get("content-type") ?? "";
  if (response.body === null || !type.startsWith("text/event-stream")) {
    if (!/json/.test(type) || response.body === null) return { response, energy: Promise.resolve(headed) };
    const energy = response
      .clone()
      .json()
      .then((body: unknown) => energyOfUsage((body as { usage?: unknown } | null)?.usage))
      .catch(() => null)
      .then((record) => (record === null ? headed : fromRecord(record)));
    return { response, energy };
  }
  const scan = new StreamScan();
  let settle: (energy: AnswerEnergy | null) => void = () => {};
  const energy = new Promise<AnswerEnergy | null>((resolve) => {
    settle = resolve;
  });
  const finish = () => settle(scan.found === null ? null : fromRecord(scan.found));
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        controller.enqueue(chunk);
        scan.push(chunk);
        if (scan.found !== null) finish();
      },
      flush: finish,
    }),
  );
  const out = new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  // What a new Response cannot be given: where the answer came from.
  Object.defineProperty(out, "url", { value: response.url });
  Object.defineProperty(out, "redirected", { value: response.redirected });
  return { response: out, energy };
}

/** Options of {@link energyFetch}. */
export interface EnergyFetchOptions {
  /** The fetch to wrap (default: globalThis.fetch). */
  readonly fetch?: typeof globalThis.fetch;
  /** Called once per answer whose energy is known (not called where it carried none). */
  readonly onEnergy: (energy: AnswerEnergy, response: Response) => void;
}

/** A `fetch` for an SDK's `fetch` option: each answer's energy goes to `onEnergy`; the answer itself is unchanged. */
export function energyFetch(options: EnergyFetchOptions): typeof globalThis.fetch {
  if (typeof options?.onEnergy !== "function") {
    throw new GiulError("INVALID_OPTION", "onEnergy: expected a function (energy, response) => void", {
      field: "onEnergy",
    });
  }
  const inner = options.fetch ?? globalThis.fetch;
  if (typeof inner !== "function")
    throw new GiulError("INVALID_OPTION", "fetch: expected a fetch function", { field: "fetch" });
  const wrapped = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const watched = watchEnergy(await inner(input, init));
    void watched.energy.then((energy) => {
      if (energy !== null) options.onEnergy(energy, watched.response);
    });
    return watched.response;
  };
  return wrapped as typeof globalThis.fetch;
}
