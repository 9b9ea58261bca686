/**
 * Numbers of long-lived objects kept unboxed. V8 keeps each field holding a fraction (or an
 * integer past the small ones) in a heap number of its own; a window's ledger events and ring edges
 * (four of each per window, alive as long as it is open) had about 50 between them, each one more
 * object for the collector to copy (bench/RESULTS.md). An object that keeps them in one array of doubles, `n`, and reaches them
 * through accessors defined here keeps them unboxed, its callers unchanged.
 */

/**
 * An object whose numbers live in `n`. Make it a literal with a fraction in every slot to be
 * filled later (0.5, then the starting value): a literal of small integers would be an array of
 * integers, reallocated at the first fraction stored in it.
 */
export interface Unboxed {
  readonly n: number[];
}

/**
 * Defines on `proto` one accessor per name, reading (and, for `writable`, writing) slot i of the
 * object's `n` for the i-th name. Declare the properties on the class (`declare v: number`).
 */
export function unboxedAccessors(proto: object, names: readonly string[], writable: readonly string[]): void {
  names.forEach((name, i) => {
    Object.defineProperty(proto, name, {
      get(this: Unboxed): number {
        return this.n[i] as number;
      },
      ...(writable.includes(name)
        ? {
            set(this: Unboxed, x: number): void {
              this.n[i] = x;
            },
          }
        : {}),
      enumerable: false,
      configurable: false,
    });
  });
}
