import { writeFileSync } from "node:fs";

// A log of known totals for giul-report's tests: what each figure of the report must be, computed
// here from the records as they are written, not by the report's code.

function record(over: Record<string, unknown>): Record<string, unknown> {
  return {
    joules: null,
    method: "unknown",
    backend: "nvml_counter",
    seconds: 0.5,
    idle_w: 60,
    tokens: null,
    joules_per_1k_tokens: null,
    stages: {},
    contended: false,
    contention_checked: true,
    contended_by: [],
    reason: null,
    measured_joules: null,
    uncertainty_joules: null,
    samples: 50,
    max_gap_ms: 10,
    attribution: "shared",
    concurrency_mean: 1,
    concurrency_max: 1,
    card_joules: null,
    ...over,
  };
}

export interface KnownLog {
  readonly sampledJoules: number;
  readonly sampledUncertainty: number;
  readonly sampledAnswers: number;
  readonly estimatedJoules: number;
  readonly estimatedAnswers: number;
  readonly unknownAnswers: number;
  readonly contended: number;
  /** Sampled J per 1k tokens of model "llama-70b". */
  readonly llamaPer1k: number;
  readonly prefillJoules: number;
  readonly decodeJoules: number;
}

/**
 * Writes `n` proxy-style records (and, `junk`, one of each kind of line to skip, the last cut
 * short) to `path`; what the report must say of them.
 */
export function writeKnownLog(path: string, n = 60, junk = true): KnownLog {
  const lines: string[] = [];
  let sampledJoules = 0;
  let sampledUncertainty = 0;
  let sampledAnswers = 0;
  let estimatedJoules = 0;
  let estimatedAnswers = 0;
  let unknownAnswers = 0;
  let contended = 0;
  let llamaJ = 0;
  let llamaTokens = 0;
  let prefillJoules = 0;
  let decodeJoules = 0;
  const t0 = Date.parse("2026-12-01T10:00:00Z");
  for (let i = 0; i < n; i++) {
    const model = i % 3 === 0 ? "mistral-7b" : "llama-70b";
    const started_at = new Date(t0 + i * 250).toISOString();
    const base = { model, started_at, duration_ms: 400 + (i % 5) * 100, request_id: `r${i}` };
    if (i % 10 === 7) {
      unknownAnswers++;
      lines.push(JSON.stringify(record({ ...base, reason: "the card was lost" })));
      continue;
    }
    if (i % 10 === 3) {
      estimatedAnswers++;
      estimatedJoules += 150;
      lines.push(
        JSON.stringify(
          record({ ...base, method: "estimated", joules: 150, tokens: 75, reason: "contended" }),
        ),
      );
      continue;
    }
    const joules = 10 + i * 1.5;
    const prefill = joules / 4;
    const tokens = 40 + i;
    const isContended = i % 10 === 9;
    sampledAnswers++;
    sampledJoules += joules;
    sampledUncertainty += joules * 0.02;
    prefillJoules += prefill;
    decodeJoules += joules - prefill;
    if (isContended) contended++;
    if (model === "llama-70b") {
      llamaJ += joules;
      llamaTokens += tokens;
    }
    lines.push(
      JSON.stringify(
        record({
          ...base,
          method: "sampled",
          joules,
          tokens,
          uncertainty_joules: joules * 0.02,
          measured_joules: joules,
          card_joules: joules * 1.2,
          contended: isContended,
          stages: {
            prefill: record({ method: "sampled", joules: prefill, uncertainty_joules: 0.1 }),
            decode: record({ method: "sampled", joules: joules - prefill, uncertainty_joules: 0.1 }),
          },
        }),
      ),
    );
  }
  if (junk) {
    lines.splice(
      5,
      0,
      "this is not json",
      '{"hello":"world"}',
      "",
      '{"method":"sampled","joules":3,"seconds":1}',
    );
  }
  const text = `${lines.join("\n")}\n${junk ? '{"joules": 12.5, "method": "sam' : ""}`;
  writeFileSync(path, text);
  return {
    sampledJoules,
    sampledUncertainty,
    sampledAnswers,
    estimatedJoules,
    estimatedAnswers,
    unknownAnswers,
    contended,
    llamaPer1k: (llamaJ / llamaTokens) * 1000,
    prefillJoules,
    decodeJoules,
  };
}
