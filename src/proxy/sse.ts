/**
 * Reading an upstream's `text/event-stream` as it passes, every byte in order: finds the final
 * `data: [DONE]` event of an OpenAI-compatible stream, keeps the last `usage` a `data:` line
 * carried, and holds back the stream's final usage chunk (`"choices": []` with a `usage` object,
 * sent when the request asked for `stream_options.include_usage`) so that the proxy can add the
 * answer's energy to its `usage` once the window has closed.
 *
 * Bytes are handed back line by line as lines end. Held: an unfinished line (until it ends, or
 * once it is longer than any line parsed, MAX_PARSED_LINE), a usage chunk until the next event
 * shows it was not the last, and everything from the `[DONE]` line on (the upstream ends right
 * after it). Line ends may be LF, CRLF or CR, as the SSE format allows.
 */

const LF = 0x0a;
const CR = 0x0d;
const DONE_FORMS: readonly Buffer[] = [Buffer.from("data: [DONE]"), Buffer.from("data:[DONE]")];
const DATA = Buffer.from("data:");
const USAGE = Buffer.from('"usage"');
/** Longer lines are passed on as they come, not parsed. */
const MAX_PARSED_LINE = 1 << 20;

/** Token counts from an OpenAI `usage` object (null where absent or not a whole number ≥ 0). */
export interface Usage {
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
}

/** The stream's final usage chunk, held: its data line's prefix and JSON, and the bytes after them. */
export interface UsageChunk {
  /** `data: ` (or `data:`) as the upstream wrote it. */
  readonly prefix: string;
  readonly json: string;
  /** The line's end and the rest of its event, as they came. */
  readonly after: Buffer;
}

/** What is left when the upstream ends. */
export interface SseEnd {
  /** The stream's `data: [DONE]` was seen at the start of an event. */
  readonly done: boolean;
  /** The last event before `[DONE]` (or the end) was a usage chunk: held, to be written first. */
  readonly usageChunk: UsageChunk | null;
  /** Bytes still held after it: the `[DONE]` line and what followed it, or an unfinished last line. */
  readonly rest: Buffer;
  /**
   * An event can be added before `rest` (when `done`) or after it without changing any event: the
   * stream is at an event boundary there.
   */
  readonly atBoundary: boolean;
  /** The stream's line end (its first), for events the proxy adds. */
  readonly eol: string;
  /** `id`, `object`, `created` and `model` of the stream's first chunk, for a usage chunk the proxy adds. */
  readonly first: Readonly<Record<string, unknown>> | null;
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

function parseData(line: Buffer): unknown {
  try {
    return JSON.parse(line.subarray(DATA.length).toString("utf8"));
  } catch {
    return undefined;
  }
}

export class SseTap {
  /** The last usage a data line carried. */
  usage: Usage | null = null;
  private done = false;
  /** Everything from the `[DONE]` line on. */
  private readonly doneBytes: Buffer[] = [];
  /** The unfinished current line (held), unless `passing`. */
  private line: Buffer[] = [];
  private lineLength = 0;
  /** The current line outgrew MAX_PARSED_LINE: passed on as it comes, not parsed. */
  private passing = false;
  /** The current line is the first of its event (the stream's start, or after a blank line). */
  private eventStart = true;
  /** The previous chunk ended with CR: a LF starting this one ends that same line. */
  private skipLf = false;
  private heldUsage: { prefix: string; json: string } | null = null;
  private held: Buffer[] = [];
  private eol: string | null = null;
  private first: Record<string, unknown> | null = null;
  private out: Buffer[] = [];

  /** Bytes to pass on now (null: none). */
  push(chunk: Buffer): Buffer | null {
    if (this.done) {
      this.doneBytes.push(chunk);
      return null;
    }
    let start = 0;
    if (this.skipLf) {
      this.skipLf = false;
      if (chunk[0] === LF) {
        this.emit(chunk.subarray(0, 1));
        start = 1;
      }
    }
    for (let i = start; i < chunk.length; i++) {
      const b = chunk[i];
      if (b !== LF && b !== CR) continue;
      let end = i + 1;
      if (b === CR) {
        if (end < chunk.length) {
          if (chunk[end] === LF) end++;
        } else this.skipLf = true;
      }
      // A CR ending a chunk may be the start of CRLF: the stream's line end is known at the next.
      if (!this.skipLf) this.eol ??= chunk.subarray(i, end).toString("latin1");
      this.endLine(chunk.subarray(start, i), chunk.subarray(i, end));
      i = end - 1;
      start = end;
      if (this.done) {
        this.doneBytes.push(chunk.subarray(start));
        return this.flush();
      }
    }
    const tail = chunk.subarray(start);
    if (tail.length > 0) {
      if (this.passing) this.emit(tail);
      else {
        this.line.push(tail);
        this.lineLength += tail.length;
        if (this.lineLength > MAX_PARSED_LINE) this.startPassing();
      }
    }
    return this.flush();
  }

  /** The upstream ended: what is still held, and where an event may go. */
  end(): SseEnd {
    const usageChunk =
      this.heldUsage === null ? null : { ...this.heldUsage, after: Buffer.concat(this.held) };
    const eol = this.eol ?? "\n";
    const first = this.first;
    if (this.done)
      return { done: true, usageChunk, rest: Buffer.concat(this.doneBytes), atBoundary: true, eol, first };
    const rest = Buffer.concat(this.line);
    this.line = [];
    const atBoundary = this.eventStart && rest.length === 0 && !this.passing;
    return { done: false, usageChunk, rest, atBoundary, eol, first };
  }

  private flush(): Buffer | null {
    const out = this.out;
    if (out.length === 0) return null;
    this.out = [];
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** Bytes of the current event: held with the usage chunk while one is held, else passed on. */
  private emit(bytes: Buffer): void {
    (this.heldUsage === null ? this.out : this.held).push(bytes);
  }

  private releaseUsage(): void {
    const held = this.heldUsage;
    if (held === null) return;
    this.heldUsage = null;
    this.out.push(Buffer.from(held.prefix + held.json, "utf8"), ...this.held);
    this.held = [];
  }

  private startPassing(): void {
    // Too long to be [DONE] or a usage chunk we would parse: whatever is held goes first.
    if (this.eventStart) this.releaseUsage();
    this.passing = true;
    this.emit(Buffer.concat(this.line));
    this.line = [];
    this.lineLength = 0;
  }

  /** A line ended: `last` is its final piece, `ending` its line end. */
  private endLine(last: Buffer, ending: Buffer): void {
    const first = this.eventStart;
    if (this.passing) {
      this.passing = false;
      this.eventStart = false;
      this.emit(last);
      this.emit(ending);
      return;
    }
    const line = this.line.length === 0 ? last : Buffer.concat([...this.line, last]);
    this.line = [];
    this.lineLength = 0;
    if (line.length === 0) {
      this.eventStart = true;
      this.emit(ending);
      return;
    }
    this.eventStart = false;
    if (first && line.length <= 12 && DONE_FORMS.some((form) => form.equals(line))) {
      this.done = true;
      this.doneBytes.push(line, ending);
      return;
    }
    // A new event after a held usage chunk: that chunk was not the last; it goes on as it came.
    if (first) this.releaseUsage();
    const data = line.subarray(0, DATA.length).equals(DATA);
    if (data && this.first === null) this.keepFirst(line);
    if (first && data && line.indexOf(USAGE) >= 0) {
      const parsed = parseData(line);
      const usage = usageOf(parsed);
      if (usage !== null) {
        this.usage = usage;
        const choices = (parsed as { choices?: unknown }).choices;
        if (Array.isArray(choices) && choices.length === 0) {
          const text = line.toString("utf8");
          const at = text.indexOf("{");
          this.heldUsage = { prefix: text.slice(0, at), json: text.slice(at) };
          this.held = [ending];
          return;
        }
      }
    }
    this.emit(line);
    this.emit(ending);
  }

  private keepFirst(line: Buffer): void {
    const parsed = parseData(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return;
    const p = parsed as Record<string, unknown>;
    this.first = { id: p.id, object: p.object, created: p.created, model: p.model };
  }
}
