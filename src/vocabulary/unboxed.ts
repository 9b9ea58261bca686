/**
 * Numbers of long-lived objects kept unboxed and off the collector's hands. V8 keeps each field
 * holding a fraction (or an integer past the small ones) in a heap number of its own, one more
 * object for the collector to copy; a window's ledger events and ring edges live as long as it is
 * open. So each object's numbers are a run of slots in a Float64Array shared by a few hundred
 * objects of its kind (a slab: its memory is outside V8's heap, never copied), reached through
 * accessors defined here.
 *
 * A slab is never reused: it is freed when the last object holding it is collected. So an object
 * kept alive keeps its slab (a few kB) alive with it; giul's events and edges live about as long
 * as their windows.
 */

/** An object whose numbers live in `slab`, from slot `at` on. */
export interface Unboxed {
  readonly slab: Float64Array;
  readonly at: number;
}

/** Objects per slab. */
const PER_SLAB = 256;

/** Hands out runs of `width` slots, a new slab when the current one is full. */
export class SlabPool {
  /** The slab being handed out, and its next free slot. */
  slab: Float64Array;
  private next = 0;

  constructor(private readonly width: number) {
    this.slab = new Float64Array(width * PER_SLAB);
  }

  /** The first slot of a new run in `this.slab` (read `slab` after calling this). */
  take(): number {
    if (this.next + this.width > this.slab.length) {
      this.slab = new Float64Array(this.width * PER_SLAB);
      this.next = 0;
    }
    const at = this.next;
    this.next = at + this.width;
    return at;
  }
}

/**
 * Defines on `proto` one accessor per name, reading (and, for `writable`, writing) slot at + i of
 * the object's slab for the i-th name. Declare the properties on the class (`declare v: number`).
 */
export function unboxedAccessors(proto: object, names: readonly string[], writable: readonly string[]): void {
  names.forEach((name, i) => {
    Object.defineProperty(proto, name, {
      get(this: Unboxed): number {
        return this.slab[this.at + i] as number;
      },
      ...(writable.includes(name)
        ? {
            set(this: Unboxed, x: number): void {
              this.slab[this.at + i] = x;
            },
          }
        : {}),
      enumerable: false,
      configurable: false,
    });
  });
}
