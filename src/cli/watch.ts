/**
 * giul-probe --watch: every card's power and its energy since the watch began, with its bar, a line
 * a second, through the backend a Meter would use, until interrupted.
 */
import { RunningEnergy, type RunningTotal, SETTLE_MS } from "../edges/running-energy.js";
import { resolveNode } from "../rules/node.js";
import { probeHost } from "../select/host.js";
import { select } from "../select/index.js";
import type { Track } from "../track/track.js";
import { whileAlive } from "../vocabulary/alive.js";
import type { BackendName } from "../vocabulary/measurement.js";

/** One card watched: its track, and its energy since the watch started. */
interface Watched {
  readonly gpu: number;
  readonly backend: BackendName;
  readonly track: Track;
  readonly energy: RunningEnergy;
}

/** --watch: a line a second per card until SIGINT/SIGTERM; exit 0. */
export async function watch(gpu: number | null, forced: BackendName | null): Promise<number> {
  const indices =
    gpu !== null
      ? [gpu]
      : (await probeHost()).devices.map((d) => d.index).filter((i, k, all) => all.indexOf(i) === k);
  if (indices.length === 0) {
    process.stderr.write("giul-probe: no card to watch (see giul-probe without --watch for why)\n");
    return 2;
  }
  const cards: Watched[] = [];
  for (const index of indices) {
    const selection = await whileAlive(
      select(resolveNode({ name: `watch-${index}`, gpuIndex: index, idleW: 0 }), forced),
    );
    if (selection.track === null || selection.track.readings === undefined) {
      process.stdout.write(`GPU ${index}: cannot be watched: ${selection.reason ?? selection.backend}\n`);
      continue;
    }
    selection.track.retain(10);
    await whileAlive(selection.track.ready());
    await whileAlive(new Promise((done) => setTimeout(done, SETTLE_MS)));
    const energy = new RunningEnergy(selection.track);
    cards.push({ gpu: index, backend: selection.backend, track: selection.track, energy });
  }
  if (cards.length === 0) return 2;
  return new Promise((done) => {
    const tick = async () => {
      const totals = await Promise.all(cards.map((card) => card.energy.advance()));
      for (const [i, card] of cards.entries()) {
        const s = card.track.readings?.latest() ?? null;
        const total = totals[i] as RunningTotal;
        const power =
          s !== null && Number.isFinite(s.powerMw)
            ? `${(s.powerMw / 1000).toFixed(1)} W`
            : "power unreadable";
        // The card's whole energy (idle included) since the watch began, measured as windows are.
        const energy = total.ok
          ? `${total.joules.toFixed(1)} J ± ${total.uncertaintyJoules.toFixed(1)} since start (${total.seconds.toFixed(1)} s`
          : `energy unknown (${total.reason}) (`;
        process.stdout.write(`GPU ${card.gpu}  ${power}  ${energy}, ${card.backend})\n`);
      }
    };
    let ticking = false;
    const timer = setInterval(() => {
      if (ticking) return; // a tick still waiting for its samples: the next one takes its place
      ticking = true;
      void tick().finally(() => {
        ticking = false;
      });
    }, 1000);
    const stop = () => {
      clearInterval(timer);
      for (const card of cards) card.track.release();
      done(0);
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
}
