/**
 * One way to read a command line for the four tools, on Node's own `util.parseArgs`: `--name value`,
 * `--name=value`, short options (`-o file`), `-h`/`--help` and `--version` everywhere. Whatever is
 * not what an option takes is one line naming the option, for the tool to print with its usage and
 * exit 2: an unknown option, a missing value, a value given to a switch, a stray argument.
 */
import { parseArgs } from "node:util";
import { packageVersion } from "../sources/native/binding.js";

/** An option a tool takes: a switch (boolean) or one that takes a value (string). */
export interface Flag {
  readonly type: "string" | "boolean";
  /** Its one-letter form, without the dash. */
  readonly short?: string;
}

export type CommandLine =
  | {
      readonly kind: "parsed";
      /** The value given to an option that takes one (the last, if given twice), by its long name. */
      readonly text: (name: string) => string | undefined;
      /** Whether a switch was given. */
      readonly on: (name: string) => boolean;
      /** The options in the order given, for a tool whose checks follow it. */
      readonly order: readonly string[];
      readonly positionals: readonly string[];
    }
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "bad"; readonly message: string };

/** A value an option cannot take, or options that do not go together: the tool exits 2. */
export class UsageError extends Error {}

/** `raw` as a whole number from `min` to `max`, else a UsageError naming the option. */
export function integerArg(option: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw)) throw new UsageError(`${option} needs an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new UsageError(`${option} must be from ${min} to ${max}, got ${n}`);
  return n;
}

const COMMON: Readonly<Record<string, Flag>> = {
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
};

/**
 * Reads `args` against `flags` (long name → Flag). `positionals`: whether the tool takes arguments
 * that are not options (giul-report's log files); else one is refused like an unknown option.
 */
export function readCommandLine(
  args: readonly string[],
  flags: Readonly<Record<string, Flag>>,
  positionals = false,
): CommandLine {
  const known: Record<string, Flag> = { ...flags, ...COMMON };
  const options = Object.fromEntries(
    Object.entries(known).map(([name, f]) => [
      name,
      f.short === undefined ? { type: f.type } : { type: f.type, short: f.short },
    ]),
  );
  // Not strict: the tokens say what each argument was, and the messages below name it the way
  // it was written (-o or --out), where strict mode's errors would each need their own wording.
  const { tokens } = parseArgs({
    args: [...args],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const values: Record<string, string | true> = {};
  const order: string[] = [];
  const rest: string[] = [];
  let problem: string | null = null;
  for (const token of tokens) {
    if (token.kind === "option-terminator") continue;
    if (token.kind === "positional") {
      if (positionals) rest.push(token.value);
      else problem ??= `unexpected argument ${JSON.stringify(token.value)}`;
      continue;
    }
    const flag = known[token.name];
    if (flag === undefined) {
      problem ??= `unknown option ${token.rawName}`;
      continue;
    }
    if (token.name === "help") return { kind: "help" };
    if (token.name === "version") return { kind: "version" };
    if (flag.type === "boolean") {
      if (token.inlineValue === true) problem ??= `${token.rawName} takes no value`;
      else values[token.name] = true;
    } else if (token.value === undefined) {
      problem ??= `${token.rawName} needs a value`;
    } else if (token.inlineValue === false && token.value.length > 1 && token.value.startsWith("-")) {
      // `--gpu --json`: the next option is not this one's value.
      problem ??= `${token.rawName} needs a value, got the option ${token.value} (a value starting with - goes as --${token.name}=${token.value})`;
    } else {
      values[token.name] = token.value;
    }
    order.push(token.name);
  }
  if (problem !== null) return { kind: "bad", message: problem };
  return {
    kind: "parsed",
    text: (name) => {
      const value = values[name];
      return typeof value === "string" ? value : undefined;
    },
    on: (name) => values[name] === true,
    order,
    positionals: rest,
  };
}

/** Prints the usage (help) or the tool and the package's version (version); the exit status, 0. */
export function helpOrVersion(kind: "help" | "version", tool: string, usage: string): number {
  process.stdout.write(kind === "help" ? usage : `${tool} ${packageVersion()}\n`);
  return 0;
}
