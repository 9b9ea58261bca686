/**
 * What `amd-smi metric --power --energy --json --watch <s>` prints: per iteration, an indented JSON
 * array with one object per GPU (after a banner line). {@link JsonFrames} cuts the stream into
 * those arrays; {@link parseAmdMetric} reads each GPU's socket power and energy counter.
 *
 * amd-smi prints the counter as round(accumulator × counter_resolution) µJ, in J to the mJ, with
 * the library's counter_resolution, a rounded 15.3 µJ where the accumulator counts 2^-16 J
 * (15.2587890625 µJ): 0.27 % high. {@link EXACT_PER_PRINTED} takes that back.
 */

/** True energy per printed joule: 2^-16 J a count over the 15.3 µJ amd-smi multiplies by. */
export const EXACT_PER_PRINTED = 1e6 / 65536 / 15.3;

/** One GPU in one iteration: its index, socket power (W) and counter (J, as printed), null when N/A. */
export interface AmdMetricRow {
  readonly gpu: number;
  readonly watts: number | null;
  readonly energyJ: number | null;
}

/** Cuts a stream of lines into the top-level JSON values it holds (text outside them is skipped). */
export class JsonFrames {
  private depth = 0;
  private text: string[] = [];

  /** The complete top-level values that `line` ends (usually none, or one). */
  push(line: string): string[] {
    const done: string[] = [];
    let inString = false;
    let escaped = false;
    let start = this.depth > 0 ? 0 : -1;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === "\\") escaped = true;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = this.depth > 0;
      else if (c === "[" || c === "{") {
        if (this.depth === 0) start = i;
        this.depth += 1;
      } else if ((c === "]" || c === "}") && this.depth > 0) {
        this.depth -= 1;
        if (this.depth === 0) {
          this.text.push(line.slice(Math.max(0, start), i + 1));
          done.push(this.text.join("\n"));
          this.text = [];
          start = -1;
        }
      }
    }
    if (this.depth > 0) this.text.push(line.slice(Math.max(0, start)));
    return done;
  }
}

/** A number, `{ value, unit }`, or "140 W"; null for "N/A" and anything else. */
function numberIn(raw: unknown): number | null {
  if (typeof raw === "number") return Number.isFinite(raw) ? raw : null;
  if (raw !== null && typeof raw === "object" && "value" in raw)
    return numberIn((raw as { value: unknown }).value);
  if (typeof raw === "string") {
    const m = /^\s*(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z]+)?\s*$/.exec(raw);
    return m === null ? null : Number(m[1]);
  }
  return null;
}

/** Each GPU of one iteration, or why the text is not one. */
export function parseAmdMetric(text: string): AmdMetricRow[] | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return `amd-smi printed something that is not JSON: ${text.slice(0, 120)}`;
  }
  const list = Array.isArray(json) ? json : [json];
  const rows: AmdMetricRow[] = [];
  for (const entry of list) {
    if (entry === null || typeof entry !== "object") continue;
    const e = entry as { gpu?: unknown; power?: unknown; energy?: unknown };
    const gpu = numberIn(e.gpu);
    if (gpu === null || !Number.isInteger(gpu)) continue;
    const power = e.power as { socket_power?: unknown; average_socket_power?: unknown } | undefined;
    const energy = e.energy as { total_energy_consumption?: unknown } | undefined;
    rows.push({
      gpu,
      watts: numberIn(power?.socket_power ?? power?.average_socket_power),
      energyJ: numberIn(energy?.total_energy_consumption),
    });
  }
  return rows.length > 0 ? rows : `amd-smi listed no GPU: ${text.slice(0, 120)}`;
}
