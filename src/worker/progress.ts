import type { SchedulerLike, Subscription } from 'rxjs';
import type { Logger } from 'pino';
import { PIPELINE } from '../config';
import type { ProgressRow } from '../db/jobs';
import { InvalidJsonError } from '../errors';
import { toJsonText } from '../json';
import type { Entry, Registry } from './registry';

/** A ctx.progress value as stored: its JSON text (undefined as null). Throws InvalidJsonError for one that cannot be stored or is over PIPELINE.progressMaxBytes. */
export function progressJson(value: unknown): string {
  const json = toJsonText(value === undefined ? null : value);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > PIPELINE.progressMaxBytes) throw new InvalidJsonError('$', `ctx.progress takes at most ${PIPELINE.progressMaxBytes} bytes of JSON, got ${bytes}`);
  return json;
}

/**
 * ctx.progress for one worker (docs/rx.md, "A job as an Observable"): each running attempt's latest
 * value, sent for all of them in one acta.report_progress call at most every `intervalMs` (the
 * first report after a quiet interval goes at once); an attempt's last value, if not stored yet when
 * it ends, goes before its completion (settle). Progress is advisory: a call that fails is logged
 * and not repeated on its own, but each of its values goes with the next call (a later batch, or its
 * attempt's settle) unless a newer value of the attempt replaced it, so a job never keeps an older
 * value than its attempt's last (test/testing/virtualWorker.spec.ts, "a failed report of an
 * attempt's last value").
 */
export class ProgressReporter {
  private readonly pending = new Map<Entry, string>();
  /** Values a failed call did not store: they go with the next call, never on their own. */
  private readonly unsent = new Map<Entry, string>();
  /** The values the batch call in flight carries. */
  private carried = new Map<Entry, string>();
  private lastCallAt = -Infinity;
  /** The batch call in flight (its settled promise), or undefined. */
  private flight?: Promise<void>;
  private timer?: Subscription;
  private closed = false;

  constructor(
    private readonly send: (rows: ProgressRow[]) => Promise<number>,
    private readonly registry: Registry,
    private readonly scheduler: SchedulerLike,
    private readonly logger: Logger,
    private readonly intervalMs = PIPELINE.progressIntervalMs,
  ) {}

  /** The handler reported `value`: checked now (progressJson), sent soon. */
  report(entry: Entry, value: unknown): void {
    const json = progressJson(value);
    if (this.closed) return;
    this.pending.set(entry, json);
    this.unsent.delete(entry);
    this.arm();
  }

  /**
   * The attempt has ended: its value not stored yet goes now, in a call of its own, and the returned
   * promise settles when that call has answered (never rejects), so that the completion written
   * after it does not fence it out. A value the batch in flight carries is waited for, and sent
   * again if that call failed. Undefined (no wait) when nothing of it is pending or in flight.
   */
  settle(entry: Entry): Promise<void> | undefined {
    if (this.closed) return undefined;
    const json = this.pending.get(entry) ?? this.unsent.get(entry);
    // Per attempt on the hot path: an attempt that reported nothing allocates nothing here.
    if (json === undefined) {
      const flight = this.flight;
      if (flight === undefined || !this.carried.has(entry)) return undefined;
      return flight.then(() => {
        const again = this.unsent.get(entry); // that call failed
        this.unsent.delete(entry);
        return again === undefined || this.closed ? undefined : this.sendLast(entry, again);
      });
    }
    this.pending.delete(entry);
    this.unsent.delete(entry);
    // After the batch in flight, if any: two calls at once could land in either order.
    return (this.flight ?? Promise.resolve()).then(() => this.sendLast(entry, json));
  }


  /** An ended attempt's last value, in a call of its own; never rejects. */
  private sendLast(entry: Entry, json: string): Promise<void> {
    return this.send([{ id: entry.row.id, execution: entry.row.execution, json }]).then(
      () => undefined,
      (err: unknown) => this.logger.warn({ err, jobId: entry.row.id }, 'progress report failed; the last value is not stored'),
    );
  }

  /** Stops sending; what is pending is dropped (the worker is stopping: the attempts' ends say the rest). */
  close(): void {
    this.closed = true;
    this.timer?.unsubscribe();
    this.pending.clear();
    this.unsent.clear();
  }

  private arm(): void {
    if (this.timer || this.flight || this.pending.size === 0 || this.closed) return;
    const wait = Math.max(0, this.lastCallAt + this.intervalMs - this.scheduler.now());
    this.timer = this.scheduler.schedule(() => {
      this.timer = undefined;
      this.flush();
    }, wait);
  }

  private flush(): void {
    const rows: ProgressRow[] = [];
    const carried = new Map<Entry, string>();
    for (const [entry, json] of [...this.unsent, ...this.pending]) {
      if (!this.registry.isCurrent(entry)) continue;
      carried.set(entry, json); // a pending value replaces an unsent one of its attempt
    }
    for (const [entry, json] of carried) rows.push({ id: entry.row.id, execution: entry.row.execution, json });
    this.pending.clear();
    this.unsent.clear();
    if (rows.length === 0) return;
    this.lastCallAt = this.scheduler.now();
    this.carried = carried;
    this.flight = this.send(rows).then(
      () => this.settled(),
      (err: unknown) => {
        this.logger.warn({ err, rows: rows.length }, 'progress report failed; the next report sends the latest values');
        // Each value goes with the next call (settle's, or a batch's) unless a newer one is pending.
        for (const [entry, json] of carried) if (!this.closed && !this.pending.has(entry) && this.registry.isCurrent(entry)) this.unsent.set(entry, json);
        this.settled();
      },
    );
  }

  private settled(): void {
    this.flight = undefined;
    this.carried = new Map();
    this.arm();
  }
}
