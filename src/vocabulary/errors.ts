/**
 * The one error class giul throws. Only programmer errors throw (an invalid node or option, a
 * window used in the wrong state); everything the hardware does is a value, never an exception.
 */

/**
 * The addon's failure codes, mirrored from `NativeFailureCode` in binding.d.ts (src/sources/native/binding.ts
 * checks at compile time that the two lists are the same).
 */
export type NativeErrorCode =
  | "NVML_LIBRARY_NOT_FOUND"
  | "NVML_SYMBOL_NOT_FOUND"
  | "NVML_DRIVER_NOT_LOADED"
  | "NVML_INIT_FAILED"
  | "NVML_DEVICE_NOT_FOUND"
  | "NVML_GPU_LOST"
  | "NVML_NOT_SUPPORTED"
  | "NVML_CALL_FAILED"
  | "SAMPLER_FAILED"
  | "AMDSMI_LIBRARY_NOT_FOUND"
  | "AMDSMI_SYMBOL_NOT_FOUND"
  | "AMDSMI_DRIVER_NOT_LOADED"
  | "AMDSMI_INIT_FAILED"
  | "AMDSMI_DEVICE_NOT_FOUND"
  | "AMDSMI_NOT_SUPPORTED"
  | "AMDSMI_CALL_FAILED"
  | "AMDSMI_VERSION_REFUSED";

/** Stable codes: match on `error.code`, never on the message. */
export type GiulErrorCode =
  /** A Node description is invalid; `field` names the offending field. */
  | "INVALID_NODE"
  /** An option is invalid; `field` names it. */
  | "INVALID_OPTION"
  /** A window was used in the wrong state (`mark()` after close, …). */
  | "WINDOW_STATE"
  /** The backend asked for cannot serve on this host. */
  | "BACKEND_UNAVAILABLE"
  | NativeErrorCode;

export interface GiulErrorOptions {
  /** The field (of a node or of options) the error is about. */
  readonly field?: string;
  /** The failure this error wraps. */
  readonly cause?: unknown;
}

// A brand shared by every copy of giul loaded in the process (two installs of different versions
// in one dependency tree), so that `instanceof GiulError` holds across them.
const kGiulError: unique symbol = Symbol.for("giul.error");

export class GiulError extends Error {
  readonly code: GiulErrorCode;
  declare readonly field?: string;
  readonly [kGiulError] = true;

  constructor(code: GiulErrorCode, message: string, options: GiulErrorOptions = {}) {
    super(message, "cause" in options ? { cause: options.cause } : undefined);
    this.name = "GiulError";
    this.code = code;
    if (options.field !== undefined) this.field = options.field;
  }

  /** True for a GiulError made by any copy of giul; a subclass keeps the ordinary check. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class being tested against (a subclass or GiulError).
    if (this !== GiulError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return (
      typeof value === "object" &&
      value !== null &&
      (value as { readonly [kGiulError]?: unknown })[kGiulError] === true
    );
  }
}

/** True when `value` is a GiulError (from any copy of giul), optionally with the given code. */
export function isGiulError(value: unknown, code?: GiulErrorCode): value is GiulError {
  return value instanceof GiulError && (code === undefined || value.code === code);
}
