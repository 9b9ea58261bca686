/**
 * giul-report's page: one self-contained HTML file (inline CSS and SVG, no script, no network).
 * Sampled and estimated figures are drawn apart (solid and hatched), unknown answers are counted
 * and never drawn as a figure, and every sampled total shows its bar. Each figure a reader (or a
 * test) looks for carries an id.
 */
import type { Band, ReportSummary } from "./summary.js";

const esc = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

/** Joules with 3 significant digits and a unit (mJ … MJ). */
export function joules(j: number | null): string {
  if (j === null || !Number.isFinite(j)) return "—";
  const a = Math.abs(j);
  const [v, u] =
    a >= 1e6 ? [j / 1e6, "MJ"] : a >= 1e3 ? [j / 1e3, "kJ"] : a >= 1 || a === 0 ? [j, "J"] : [j * 1e3, "mJ"];
  return `${Number(v.toPrecision(3))} ${u}`;
}

const pct = (n: number, of: number) => (of > 0 ? `${((100 * n) / of).toFixed(1)} %` : "—");
const count = (n: number) => n.toLocaleString("en");

const SAMPLED = "#1f6feb";
const ESTIMATED = "#d29922";

function totals(s: ReportSummary): string {
  const row = (label: string, id: string, value: string, note = "") =>
    `<tr><th>${label}</th><td id="${id}">${value}</td><td class="note">${note}</td></tr>`;
  const sm = s.sampled;
  const es = s.estimated;
  return `<table class="totals">
${row("answers", "answers", count(s.answers))}
${row("sampled (measured)", "sampled-answers", count(sm.answers), pct(sm.answers, s.answers))}
${row("estimated (from the hint)", "estimated-answers", count(es.answers), pct(es.answers, s.answers))}
${row("unknown (no figure)", "unknown-answers", count(s.unknown), pct(s.unknown, s.answers))}
${row("contended (another tenant on the card)", "contended-answers", count(s.contended), pct(s.contended, s.answers))}
${row("sampled joules above idle", "sampled-joules", joules(sm.joules), `± <span id="sampled-uncertainty">${joules(sm.uncertaintyJoules)}</span> (Σ of the bars)`)}
${row("estimated joules (not measured)", "estimated-joules", joules(es.joules), "kept apart: never added to the sampled total")}
${row("sampled J per answer", "sampled-per-answer", joules(sm.joulesPerAnswer), `median ${joules(sm.p50)}, p90 ${joules(sm.p90)}, p99 ${joules(sm.p99)}`)}
${row("sampled J per 1k tokens", "sampled-per-1k", joules(sm.joulesPer1kTokens), "answers that reported tokens")}
${row("estimated J per answer", "estimated-per-answer", joules(es.joulesPerAnswer))}
</table>`;
}

function histogram(s: ReportSummary): string {
  const { edges, sampled, estimated } = s.histogram;
  const used = edges.map((_, i) => (sampled[i] as number) + (estimated[i] as number) > 0);
  const first = used.indexOf(true);
  if (first < 0) return `<p class="empty">No answer has a figure.</p>`;
  const last = used.lastIndexOf(true);
  const from = Math.max(0, first - 1);
  const to = Math.min(edges.length - 1, last + 1);
  const n = to - from + 1;
  const W = 760;
  const H = 220;
  const max = Math.max(1, ...sampled.slice(from, to + 1), ...estimated.slice(from, to + 1));
  const bw = (W - 60) / n;
  const bars: string[] = [];
  for (let i = from; i <= to; i++) {
    const x = 50 + (i - from) * bw;
    const hs = ((sampled[i] as number) / max) * (H - 40);
    const he = ((estimated[i] as number) / max) * (H - 40);
    bars.push(
      `<rect class="bar sampled" x="${x.toFixed(1)}" y="${(H - 20 - hs).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${hs.toFixed(1)}" fill="${SAMPLED}"><title>${count(sampled[i] as number)} sampled ≤ ${joules(edges[i] as number)}</title></rect>`,
      `<rect class="bar estimated" x="${(x + bw / 2).toFixed(1)}" y="${(H - 20 - he).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${he.toFixed(1)}" fill="url(#hatch)"><title>${count(estimated[i] as number)} estimated ≤ ${joules(edges[i] as number)}</title></rect>`,
    );
  }
  const ticks: string[] = [];
  for (let i = from; i <= to; i += Math.max(1, Math.round(n / 8))) {
    const x = 50 + (i - from) * bw;
    ticks.push(`<text x="${x.toFixed(1)}" y="${H - 4}" class="tick">${joules(edges[i] as number)}</text>`);
  }
  return `<svg id="histogram" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="J per answer">
${HATCH}<line x1="48" y1="${H - 20}" x2="${W - 10}" y2="${H - 20}" stroke="#888"/>
<text x="4" y="14" class="tick">${count(max)}</text>
${bars.join("\n")}
${ticks.join("\n")}
</svg>`;
}

const HATCH = `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="${ESTIMATED}" stroke-width="3"/></pattern></defs>`;

function models(s: ReportSummary): string {
  const rows = s.byModel.map(
    (m) =>
      `<tr class="model" data-model="${esc(m.model)}"><td>${esc(m.model)}</td><td>${count(m.answers)}</td><td>${count(m.sampledAnswers)}</td><td class="jper1k">${joules(m.sampledJoulesPer1kTokens)}</td><td>${joules(m.sampledJoules)} ± ${joules(m.sampledUncertaintyJoules)}</td><td>${count(m.estimatedAnswers)}</td><td>${count(m.unknownAnswers)}</td></tr>`,
  );
  return `<table id="models"><tr><th>model</th><th>answers</th><th>sampled</th><th>sampled J / 1k tokens</th><th>sampled J (± Σ bars)</th><th>estimated</th><th>unknown</th></tr>
${rows.join("\n")}
</table>`;
}

function stages(s: ReportSummary): string {
  if (s.stages.length === 0) return `<p class="empty">The records have no stages.</p>`;
  const max = Math.max(...s.stages.map((st) => st.sampledJoules), 1e-9);
  const rows = s.stages.map((st, i) => {
    const w = (st.sampledJoules / max) * 340;
    return `<g class="stage" data-stage="${esc(st.name)}"><text x="0" y="${18 + i * 26}" class="label">${esc(st.name)}</text><rect x="110" y="${6 + i * 26}" width="${w.toFixed(1)}" height="16" fill="${SAMPLED}"/><text x="${(116 + w).toFixed(1)}" y="${18 + i * 26}" class="tick">${joules(st.sampledJoules)} sampled over ${count(st.sampledAnswers)} answers${st.otherAnswers > 0 ? `; ${count(st.otherAnswers)} not sampled` : ""}</text></g>`;
  });
  return `<svg id="stages" viewBox="0 0 760 ${s.stages.length * 26 + 8}" width="760" height="${s.stages.length * 26 + 8}">${rows.join("")}</svg>`;
}

function timeline(s: ReportSummary): string {
  const t = s.timeline;
  if (t === null) return `<p class="empty">The records have no times (giul-proxy's log has them).</p>`;
  const W = 760;
  const lanesH = 160;
  const powerH = 100;
  const span = Math.max(1, t.to - t.from);
  const x = (ms: number) => 40 + ((ms - t.from) / span) * (W - 50);
  // Requests packed into lanes, each in the first lane free at its start.
  const laneEnds: number[] = [];
  const lanes = t.bands.map((b: Band) => {
    let lane = laneEnds.findIndex((end) => end <= b.t0);
    if (lane < 0) {
      lane = laneEnds.length;
      laneEnds.push(0);
    }
    laneEnds[lane] = b.t1;
    return lane;
  });
  const lh = Math.max(1, Math.min(8, lanesH / Math.max(1, laneEnds.length)));
  const rects = t.bands.map((b, i) => {
    const fill = b.method === "sampled" ? SAMPLED : b.method === "estimated" ? "url(#hatch)" : "#bbb";
    return `<rect class="band ${b.method}" x="${x(b.t0).toFixed(1)}" y="${(4 + (lanes[i] as number) * lh).toFixed(1)}" width="${Math.max(0.5, x(b.t1) - x(b.t0)).toFixed(1)}" height="${Math.max(0.5, lh - 0.5).toFixed(1)}" fill="${fill}"><title>${b.method} ${joules(b.joules)}</title></rect>`;
  });
  const power = t.bands.filter((b) => b.cardW !== null);
  const maxW = Math.max(1, ...power.map((b) => b.cardW as number));
  const dots = power.map(
    (b) =>
      `<circle cx="${x((b.t0 + b.t1) / 2).toFixed(1)}" cy="${(lanesH + 20 + powerH - ((b.cardW as number) / maxW) * powerH).toFixed(1)}" r="1.6" fill="#cf222e"/>`,
  );
  const secs = ((t.to - t.from) / 1000).toFixed(1);
  return `<svg id="timeline" viewBox="0 0 ${W} ${lanesH + powerH + 40}" width="${W}" height="${lanesH + powerH + 40}">
${HATCH}${rects.join("")}
<line x1="40" y1="${lanesH + 20 + powerH}" x2="${W - 10}" y2="${lanesH + 20 + powerH}" stroke="#888"/>
<text x="0" y="${lanesH + 30}" class="tick">${Math.round(maxW)} W</text>
${dots.join("")}
<text x="40" y="${lanesH + powerH + 36}" class="tick">0 s</text><text x="${W - 60}" y="${lanesH + powerH + 36}" class="tick">${secs} s</text>
</svg>
<p class="note">${count(t.bands.length)} of the timed requests drawn${t.bands.length >= 2000 ? " (a uniform sample)" : ""}: blue sampled, hatched estimated, grey unknown. Red: the card's average draw over each request (card_joules / seconds + idle), where the log has it.</p>`;
}

/** The whole page. */
export function renderReport(s: ReportSummary): string {
  const skipped = s.skipped;
  const skips = [
    skipped.unreadable > 0 ? `${count(skipped.unreadable)} unreadable` : null,
    skipped.truncated > 0
      ? `${count(skipped.truncated)} truncated last line${skipped.truncated > 1 ? "s" : ""}`
      : null,
    skipped.notGiul > 0 ? `${count(skipped.notGiul)} not giul 0.2 records` : null,
  ].filter((x) => x !== null);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>giul report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328;max-width:820px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #eee}
td{font-variant-numeric:tabular-nums}.note,.empty{color:#59636e;font-size:12px}.tick{font-size:10px;fill:#59636e}.label{font-size:12px}
.key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
</style></head><body>
<h1>Where the energy went</h1>
<p class="note" id="source">${s.files.map(esc).join(", ")}: ${count(s.lines)} lines, <span id="records">${count(s.records)}</span> records${skips.length > 0 ? `; skipped <span id="skipped">${skips.join(", ")}</span>` : ""}.</p>
<h2>Totals</h2>
${totals(s)}
<h2>Joules per answer</h2>
<p class="key"><span style="background:${SAMPLED}"></span>sampled<span style="background:${ESTIMATED}"></span>estimated (hatched; not measured). Unknown answers have no figure and are not drawn.</p>
${histogram(s)}
<h2>By model</h2>
${models(s)}
<h2>Stages (prefill against decode)</h2>
${stages(s)}
<h2>Requests over time</h2>
${timeline(s)}
</body></html>
`;
}
