/**
 * Checking what callers hand in, one way everywhere: a value described the same way in every
 * message (strings quoted), unknown keys reported with the nearest known name (and a Python
 * snake_case name pointed at its camelCase), counts that must be integers. Imports nothing of ours
 * but errors; the callers build their own GiulError (node fields, options).
 */

/** A value as an error message shows it: strings quoted, never a thrown conversion. */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "boolean":
    case "undefined":
      return String(value);
    case "bigint":
      return `${value}n`;
    case "symbol":
      return value.toString();
    case "function":
      return "a function";
    default:
      if (value === null) return "null";
      if (Array.isArray(value)) return "an array";
      return "an object";
  }
}

/** snake_case → camelCase, for names ported from giul 0.2 for Python. */
function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** `short` is `long` with letters left out (same first letter, the rest in order). */
function abbreviates(short: string, long: string): boolean {
  if (short[0] !== long[0] || short.length >= long.length) return false;
  let j = 0;
  for (const c of long) if (c === short[j]) j += 1;
  return j >= short.length;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j] as number;
      row[j] = Math.min(above + 1, (row[j - 1] as number) + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length] as number;
}

/**
 * Why `key` is not a known key: with the name meant, when one is near (a case slip, a Python
 * name, a typo), else the list of known keys.
 */
export function unknownKey(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  const fromPython = camel(key);
  let best: string | null = null;
  if (fromPython !== key && known.includes(fromPython)) {
    return `unknown key; did you mean "${fromPython}"? (giul for Node.js uses camelCase)`;
  }
  for (const k of known) if (k.toLowerCase() === lower) best = k;
  // An abbreviation ("secs" for "seconds") or an overlong name ("weights" for "weight").
  if (best === null && lower.length >= 3) {
    best =
      known.find((k) => abbreviates(lower, k.toLowerCase()) || lower.startsWith(k.toLowerCase())) ?? null;
  }
  if (best === null) {
    let nearest = Number.POSITIVE_INFINITY;
    for (const k of known) {
      const d = distance(lower, k.toLowerCase());
      if (d < nearest) {
        nearest = d;
        best = k;
      }
    }
    if (nearest > Math.max(2, Math.floor(key.length / 4))) best = null;
  }
  return best !== null
    ? `unknown key; did you mean "${best}"?`
    : `unknown key; known keys are ${known.join(", ")}`;
}

/** The first key of `value` that is not in `known`, or null. */
export function firstUnknownKey(value: object, known: readonly string[]): string | null {
  // for…in with an own-property check: no array of keys is built per call (a window checks its
  // options twice).
  for (const key in value) if (Object.hasOwn(value, key) && !known.includes(key)) return key;
  return null;
}

/** A finite number from `lo` to `hi` (both included). */
export function isFiniteIn(value: unknown, lo: number, hi: number): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= lo && value <= hi;
}
