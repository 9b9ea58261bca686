/**
 * Reading an upstream's `text/event-stream` as it passes, without changing a byte of it: finds the
 * final `data: [DONE]` event of an OpenAI-compatible stream (so the proxy can put its energy comment
 * just before it) and keeps the last `usage` object a `data:` line carried (sent when the request
 * asked for `stream_options.include_usage`).
 *
 * Bytes are handed back as they arrive, chunk by chunk. Two things are held: the start of a line
 * that may still turn out to be `data: [DONE]` (at most 12 bytes, until the next chunk says), and,
 * once the `[DONE]` line is seen, everything from its first byte on (until the upstream ends, which
 * it does right after).
 */

const LF = 0x0a;
const CR = 0x0d;
const DONE_FORMS: readonly Buffer[] = [Buffer.from("data: [DONE]"), Buffer.from("data:[DONE]")];
const LONGEST_DONE = 12;
const DATA = Buffer.from("data:");
const USAGE = Buffer.from('"usage"');
/** Longer lines are passed on but not parsed for usage. */
const MAX_PARSED_LINE = 1 << 20;

/** Token counts from an OpenAI `usage` object (null where absent or not a whole number ≥ 0). */
export interface Usage {
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
}

/** What is left when the upstream ends. */
export interface SseEnd {
  /** The stream's `data: [DONE]` was seen at the start of an event. */
  readonly done: boolean;
  /** Bytes still held: the `[DONE]` line and what followed it, or an unfinished last line. */
  readonly rest: Buffer;
  /**
   * A comment can be added after `rest` without changing any event: the stream ended on an event
   * boundary. Always true when `done` (the comment then goes before `rest`).
   */
  readonly atBoundary: boolean;
}

function count(value: unknown): number | null {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

/** The token counts of a parsed body's (or chunk's) `usage` object, or null when it has none. */
export function usageOf(parsed: unknown): Usage | null {
  if (typeof parsed !== "object" || parsed === null) return null;
  const usage = (parsed as { usage?: unknown }).usage;
  if (typeof usage !== "object" || usage === null || Array.isArray(usage)) return null;
  const u = usage as { prompt_tokens?: unknown; completion_tokens?: unknown };
  return { promptTokens: count(u.prompt_tokens), completionTokens: count(u.completion_tokens) };
}

export class SseTap {
  /** The last usage a data line carried. */
  usage: Usage | null = null;
  private done = false;
  /** Everything from the `[DONE]` line on. */
  private readonly held: Buffer[] = [];
  /** Bytes of the unfinished current line, kept for parsing (up to MAX_PARSED_LINE). */
  private partial: Buffer[] = [];
  private partialLength = 0;
  /** Bytes of the unfinished current line not yet handed back: it may be `data: [DONE]`. */
  private candidate: Buffer[] = [];
  /** The current line is the first of its event (the stream's start, or after a blank line). */
  private eventStart = true;
  /** The previous chunk ended with CR: a LF starting this one belongs to that line ending. */
  private skipLf = false;

  /** Bytes to pass on now (null: none). Never more than the chunk plus what was held before it. */
  push(chunk: Buffer): Buffer | null {
    if (this.done) {
      this.held.push(chunk);
      return null;
    }
    let released: Buffer[] | null = null;
    let lineStart = 0;
    if (this.skipLf) {
      this.skipLf = false;
      if (chunk[0] === LF) lineStart = 1;
    }
    for (let i = lineStart; i < chunk.length; i++) {
      const b = chunk[i];
      if (b !== LF && b !== CR) continue;
      const line = this.completeLine(chunk.subarray(lineStart, i));
      if (line === "done") {
        // The [DONE] line starts either in an earlier chunk (held as a candidate) or here.
        this.done = true;
        if (this.candidate.length > 0) {
          this.held.push(...this.candidate, chunk);
          this.candidate = [];
          return released === null ? null : Buffer.concat(released);
        }
        this.held.push(chunk.subarray(lineStart));
        return join(released, chunk.subarray(0, lineStart));
      }
      if (this.candidate.length > 0) {
        released = this.candidate;
        this.candidate = [];
      }
      let next = i + 1;
      if (b === CR) {
        if (next < chunk.length) {
          if (chunk[next] === LF) next++;
        } else this.skipLf = true;
      }
      i = next - 1;
      lineStart = next;
    }
    const tail = chunk.subarray(lineStart);
    if (tail.length === 0) return join(released, chunk);
    this.keepPartial(tail);
    if (this.mayBeDone()) {
      this.candidate.push(tail);
      return join(released, chunk.subarray(0, lineStart));
    }
    if (this.candidate.length > 0) {
      released = this.candidate;
      this.candidate = [];
    }
    return join(released, chunk);
  }

  /** The upstream ended: what is still held, and where a comment may go. */
  end(): SseEnd {
    if (this.done) return { done: true, rest: Buffer.concat(this.held), atBoundary: true };
    const rest = Buffer.concat(this.candidate);
    this.candidate = [];
    return { done: false, rest, atBoundary: this.eventStart && this.partialLength === 0 };
  }

  private keepPartial(piece: Buffer): void {
    this.partialLength += piece.length;
    if (this.partialLength <= MAX_PARSED_LINE) this.partial.push(piece);
    else this.partial = [];
  }

  /** The unfinished line is the first of its event and still a prefix of a `[DONE]` line. */
  private mayBeDone(): boolean {
    if (!this.eventStart || this.partialLength > LONGEST_DONE) return false;
    const line = this.partial.length === 1 ? (this.partial[0] as Buffer) : Buffer.concat(this.partial);
    return DONE_FORMS.some((form) => form.subarray(0, line.length).equals(line));
  }

  /** A line ended with `last` as its final piece. */
  private completeLine(last: Buffer): "done" | "line" {
    const length = this.partialLength + last.length;
    let line: Buffer | null;
    if (length > MAX_PARSED_LINE) line = null;
    else if (this.partial.length === 0) line = last;
    else line = Buffer.concat([...this.partial, last]);
    this.partial = [];
    this.partialLength = 0;
    if (length === 0) {
      this.eventStart = true;
      return "line";
    }
    const first = this.eventStart;
    this.eventStart = false;
    if (line === null) return "line";
    if (first && length <= LONGEST_DONE && DONE_FORMS.some((form) => form.equals(line))) return "done";
    if (line.subarray(0, DATA.length).equals(DATA) && line.indexOf(USAGE) >= 0) this.readUsage(line);
    return "line";
  }

  private readUsage(line: Buffer): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line.subarray(DATA.length).toString("utf8"));
    } catch {
      return;
    }
    const usage = usageOf(parsed);
    if (usage !== null) this.usage = usage;
  }
}

function join(first: Buffer[] | null, then: Buffer): Buffer | null {
  if (first === null) return then.length === 0 ? null : then;
  return Buffer.concat(then.length === 0 ? first : [...first, then]);
}
