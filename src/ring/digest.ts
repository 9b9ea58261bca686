/**
 * When a running counter's new samples are digested between edges (./ring-track.ts): the fused
 * counter (./fusion.ts) reads them now and then while the ring runs, so that the edges of a close()
 * (windows closing together) do not first digest everything sampled since the window opened (the
 * counter's steps checked against the power, its cadence fitted). Edges digest too, and push the
 * timer back, so that windows coming and going never have it wake the event loop; with no window
 * it digests seldom. One timer.
 */

/**
 * How often while windows use the ring (ms): a close digests at most this long's samples first
 * (about 20 at the default period, well under a millisecond), and a window open on a quiet card
 * wakes the event loop 10 times a second for it, not 40.
 */
const DIGEST_MS = 100;
/**
 * How often with no window (ms): the sampler lingers and backs off for a minute, and a timer every
 * DIGEST_MS would wake the event loop 10 times a second for a handful of samples. At most a few
 * hundred samples wait for the next window (the ring holds 16,384), digested once.
 */
const IDLE_DIGEST_MS = 250;
/** Ticks in a row with no window before the digest slows down (about 300 ms). */
const IDLE_DIGEST_AFTER = 3;

/** What the digest asks of its track. */
export interface DigestHost {
  /** Whether a window uses the ring. */
  busy(): boolean;
  /** Digest the new samples now. */
  digest(): void;
}

export class RingDigest {
  private timer: NodeJS.Timeout | null = null;
  /** The interval (ms), and the ticks in a row that found no window. */
  private ms = DIGEST_MS;
  private idleTicks = 0;

  constructor(private readonly host: DigestHost) {}

  /** The ring started: every DIGEST_MS. */
  start(): void {
    this.restart(DIGEST_MS);
  }

  /** A window came: the quick interval again, the idle ticks counted afresh. */
  retained(): void {
    // Edges push the ticks back, so a tick may never see this window: count afresh.
    this.idleTicks = 0;
    if (this.ms !== DIGEST_MS && this.timer !== null) this.restart(DIGEST_MS);
  }

  /**
   * The fused counter digested new samples (for an edge, or on the timer): the next tick is pushed
   * back, so that while edges keep the digest current the timer never wakes the event loop.
   */
  readonly digested = (): void => {
    this.timer?.refresh();
  };

  /** The ring stopped. */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private restart(ms: number): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.ms = ms;
    this.idleTicks = 0;
    this.timer = setInterval(() => this.tick(), ms);
    this.timer.unref();
  }

  private tick(): void {
    this.host.digest();
    // No window for a while (lingering, backed off): digest seldom, not 10 times a second.
    if (this.host.busy()) this.idleTicks = 0;
    else if (this.ms === DIGEST_MS && ++this.idleTicks >= IDLE_DIGEST_AFTER) this.restart(IDLE_DIGEST_MS);
  }
}
