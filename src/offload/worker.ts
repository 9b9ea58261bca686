/**
 * The accounting worker: the per-card ledger of one environment's windows, run on a thread of its
 * own so that the event loop of the environment that meters them does not run it.
 *
 * The environment appends its windows' events to each card's process-wide event log as usual
 * (./kinds.ts says whose each is), tells this worker once per card where to follow from, and pokes
 * it when windows have closed. The worker reads the log with the same CardLedger and RingTrack the
 * environment would otherwise run itself — every environment's events, so that windows share the
 * card as they always do — evaluates each closed window with measureWindow, and posts the outcomes
 * back; the environment applies the rules (src/energy.ts) to them in result(), as before. Nothing
 * here decides anything the in-environment path does not: it is the same code, elsewhere.
 */
import type { MessagePort } from "node:worker_threads";
import type { GiulBinding } from "../../binding.js";
import { nvmlTrack } from "../backends/nvml.js";
import type { RingTrack } from "../backends/ring-track.js";
import { type EventLogEntry, emptyLogEntry, type SharedLog } from "../backends/track.js";
import type { Attribution, Concurrency } from "../energy.js";
import { CardLedger, type LedgerEvent, LedgerWindow } from "../ledger.js";
import { measureWindow, type Outcome, type StageMark } from "../meter-measure.js";
import { encodeOutcomes, failedOutcome } from "./codec.js";
import {
  KIND_CLOSE,
  KIND_COMPENSATION,
  KIND_MARK,
  KIND_OPEN_EXCLUSIVE,
  KIND_OPEN_SHARED,
  KIND_WEIGHT,
} from "./kinds.js";
import { type CardMessage, type FromWorker, type OutcomeItem, POKE_FLAG, type ToWorker } from "./protocol.js";

/** How often the logs are read while windows are open, poked or not (ms): never a whole log behind. */
const CATCH_UP_MS = 100;

/** One of the environment's windows, as its events are read from the log. */
interface Followed {
  readonly entries: LedgerWindow;
  readonly open: LedgerEvent;
  readonly attribution: Attribution;
  readonly idleW: number;
  readonly marks: StageMark[];
}

interface Card {
  readonly message: CardMessage;
  readonly track: RingTrack;
  readonly ledger: CardLedger;
  /** The next entry of the log to read; whether the entries before it were read. */
  cursor: number;
  started: boolean;
  /** The log read (a new one after the sampler restarted). */
  log: SharedLog["log"] | null;
  readonly windows: Map<number, Followed>;
  /** Windows closed and not yet measured. */
  closing: number;
  retained: boolean;
  /** Replaced (see CardMessage.replaces): dropped once none of its windows is left. */
  retiring: boolean;
}

/** Entries the log holds (older ones are overwritten). */
function capacityOf(log: SharedLog["log"]): number {
  return log.capacity ?? Number.POSITIVE_INFINITY;
}

export interface WorkerEnv {
  readonly port: MessagePort;
  readonly flags: Int32Array;
  readonly binding: () => Promise<GiulBinding | string>;
}

export function runAccounting(env: WorkerEnv): void {
  const cards = new Map<number, Card>();
  const entry: EventLogEntry = emptyLogEntry();
  let outbox: OutcomeItem[] = [];
  let flushing = false;
  let catchUp: NodeJS.Timeout | null = null;
  let binding: GiulBinding | null = null;
  let failed: string | null = null;
  const waiting: ToWorker[] = [];

  const post = (message: FromWorker): void => env.port.postMessage(message);

  const send = (item: OutcomeItem): void => {
    outbox.push(item);
    if (flushing) return;
    flushing = true;
    setImmediate(() => {
      flushing = false;
      const items = outbox;
      outbox = [];
      const { numbers, strings } = encodeOutcomes(items);
      env.port.postMessage({ type: "outcomes", numbers, strings } satisfies FromWorker, [
        numbers.buffer as ArrayBuffer,
      ]);
      // Windows that closed meanwhile (no poke came: the flag said this worker was busy).
      readAll();
    });
  };

  const retain = (card: Card): void => {
    if (card.retained) return;
    card.retained = true;
    card.track.retain(card.message.periodMs);
  };

  const releaseIfIdle = (card: Card): void => {
    if (!card.retained || card.windows.size > 0 || card.closing > 0) return;
    card.retained = false;
    card.track.release();
  };

  const measure = async (card: Card, owner: number, w: Followed, close: LedgerEvent, c: Concurrency) => {
    let outcome: Outcome;
    try {
      await card.ledger.settleThrough(close);
      outcome = measureWindow(
        {
          track: card.track,
          ledger: card.ledger,
          entries: w.entries,
          idleW: w.idleW,
          attribution: w.attribution,
          failure: null,
        },
        w.marks,
        c,
      );
    } catch (error) {
      outcome = failedOutcome(`evaluating the window failed: ${String(error)}`);
    }
    card.closing -= 1;
    send([owner, outcome]);
    releaseIfIdle(card);
  };

  /** Every window of the environment open on the card gets no measurement, with `reason`. */
  const failAll = (card: Card, reason: string): void => {
    for (const owner of card.windows.keys()) send([owner, failedOutcome(reason)]);
    card.windows.clear();
  };

  /** Whether a window of any card is being measured (its close read, its outcome not yet sent). */
  const measuring = (): boolean => {
    for (const card of cards.values()) if (card.closing > 0) return true;
    return false;
  };

  /** An event of the environment's own windows. */
  const own = (card: Card, event: LedgerEvent, e: EventLogEntry): void => {
    const owner = e.owner as number;
    const kind = e.kind as number;
    if (kind === KIND_OPEN_SHARED || kind === KIND_OPEN_EXCLUSIVE) {
      const weight = e.own as number;
      const entries = new LedgerWindow(weight);
      event.own = weight;
      entries.add(event);
      card.windows.set(owner, {
        entries,
        open: event,
        attribution: kind === KIND_OPEN_EXCLUSIVE ? "exclusive" : "shared",
        idleW: e.idleW as number,
        marks: [],
      });
      return;
    }
    if (kind === KIND_COMPENSATION) {
      // The environment's reference was dropped: whatever it left open was closed for it.
      card.windows.clear();
      return;
    }
    const w = card.windows.get(owner);
    if (w === undefined) {
      // Its opening was not read (lost as the log wrapped): it cannot be measured, but it is
      // waited for.
      if (kind === KIND_CLOSE)
        send([owner, failedOutcome("the window's opening event was lost from the card's log")]);
      return;
    }
    if (kind === KIND_MARK) {
      const start =
        w.marks.length === 0
          ? w.open
          : (w.entries.events[(w.marks.at(-1) as StageMark).index] as LedgerEvent);
      event.own = w.entries.weight;
      w.entries.add(event);
      // Exact now: the mark is the newest event read.
      w.marks.push({
        name: "",
        index: w.entries.events.length - 1,
        tokens: null,
        maxConcurrency: card.ledger.maxCountSince(start) | 0,
      });
    } else if (kind === KIND_WEIGHT) {
      w.entries.weight = e.own as number;
      event.own = w.entries.weight;
      w.entries.add(event);
    } else if (kind === KIND_CLOSE) {
      w.entries.weight = 0;
      event.own = 0;
      w.entries.add(event);
      card.windows.delete(owner);
      card.closing += 1;
      void measure(card, owner, w, event, card.ledger.concurrency(w.open, event));
    }
  };

  /** Reads the card's log up to its newest entry. */
  const read = (card: Card): void => {
    retain(card);
    const shared = card.track.sharedLog?.() ?? null;
    if (shared === null) {
      // No ring here (the sampler could not be started in this thread): nothing can be measured.
      failAll(card, "the accounting worker has no sampler for the card");
      releaseIfIdle(card);
      return;
    }
    const log = shared.log;
    const published = log.published();
    let gap: "lost" | "skipped" | null = card.started ? null : "skipped";
    if (card.log !== null && card.log !== log && published < card.cursor) {
      // A new log: the sampler restarted, and what the old one said of open windows is gone.
      failAll(card, "the card's sampler restarted while the window was open");
      card.cursor = published;
      gap = "skipped";
    }
    card.log = log;
    for (; card.cursor < published; card.cursor++) {
      if (!log.read(card.cursor, entry)) {
        // Still held, and the read only met appends in progress: read it again in a moment (a
        // window's event is never skipped for that). Gone (the log wrapped first): lost.
        if (card.cursor >= log.published() - capacityOf(log)) {
          retrySoon();
          break;
        }
        gap = "lost";
        continue;
      }
      const event = card.ledger.followEntry(shared.edgeAt(entry.t, entry.ringHead), entry, gap);
      gap = null;
      card.started = true;
      if (entry.ref === card.message.ref) own(card, event, entry);
    }
    releaseIfIdle(card);
  };

  let retrying = false;
  const retrySoon = (): void => {
    if (retrying) return;
    retrying = true;
    setTimeout(() => {
      retrying = false;
      readAll();
    }, 1);
  };

  const readAll = (): void => {
    readCards();
    if (measuring()) return;
    // Idle: closes poke again from now on. A close appended just before the flag was cleared
    // poked nobody, so the logs are read once more.
    Atomics.store(env.flags, POKE_FLAG, 0);
    readCards();
    if (measuring()) Atomics.store(env.flags, POKE_FLAG, 1);
  };

  const readCards = (): void => {
    for (const [id, card] of cards) {
      if (card.retiring && card.windows.size === 0 && card.closing === 0) {
        if (card.retained) card.track.release();
        cards.delete(id);
        continue;
      }
      try {
        read(card);
      } catch (error) {
        failAll(card, `reading the card's log failed: ${String(error)}`);
      }
    }
    const open = [...cards.values()].some((c) => c.windows.size > 0);
    if (open && catchUp === null) {
      catchUp = setInterval(readAll, CATCH_UP_MS);
    } else if (!open && catchUp !== null) {
      clearInterval(catchUp);
      catchUp = null;
    }
  };

  const handle = (message: ToWorker): void => {
    if (message.type === "poke") {
      // The flag stays set while windows are being measured: closes meanwhile are read when the
      // outcomes are sent (no poke each), and it is cleared once none is (see readAll).
      readAll();
      return;
    }
    const b = binding as GiulBinding;
    const { spec } = message;
    const track = nvmlTrack(b, spec.index, { counter: spec.counter, instantPower: spec.instantPower });
    const old = message.replaces === null ? undefined : cards.get(message.replaces);
    if (old !== undefined) old.retiring = true;
    cards.set(message.card, {
      message,
      track,
      ledger: new CardLedger(track),
      cursor: message.from,
      started: false,
      log: null,
      windows: new Map(),
      closing: 0,
      retained: false,
      retiring: false,
    });
  };

  env.port.on("message", (message: ToWorker) => {
    if (failed !== null) return;
    if (binding === null) waiting.push(message);
    else handle(message);
  });
  void env.binding().then((b) => {
    if (typeof b === "string") {
      failed = b;
      post({ type: "failed", reason: b });
      env.port.close();
      return;
    }
    binding = b;
    post({ type: "ready" });
    for (const message of waiting.splice(0)) handle(message);
  });
}
