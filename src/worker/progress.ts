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
 * first report after a quiet interval goes at once); an attempt's last value, if not sent yet when
 * it ends, goes before its completion (settle). Progress is advisory: a call that fails is logged
 * and its values dropped (the next report sends the latest).
 */
export class ProgressReporter {
  private readonly pending = new Map<Entry, string>();
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
    this.arm();
  }

  /**
   * The attempt has ended: its value not sent yet goes now, in a call of its own, and the returned
   * promise settles when that call has answered (never rejects), so that the completion written
   * after it does not fence it out. Resolves at once when nothing of it is pending.
   */
  settle(entry: Entry): Promise<void> | undefined {
    const json = this.pending.get(entry);
    if (json === undefined || this.closed) return undefined;
    this.pending.delete(entry);
    // After the batch in flight, if any: two calls at once could land in either order.
    const row = { id: entry.row.id, execution: entry.row.execution, json };
    return (this.flight ?? Promise.resolve()).then(() => this.send([row])).then(
      () => undefined,
      (err: unknown) => this.logger.warn({ err, jobId: entry.row.id }, 'progress report failed; the last value is not stored'),
    );
  }

  /** Stops sending; what is pending is dropped (the worker is stopping: the attempts' ends say the rest). */
  close(): void {
    this.closed = true;
    this.timer?.unsubscribe();
    this.pending.clear();
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
    for (const [entry, json] of this.pending) {
      if (this.registry.isCurrent(entry)) rows.push({ id: entry.row.id, execution: entry.row.execution, json });
    }
    this.pending.clear();
    if (rows.length === 0) return;
    this.lastCallAt = this.scheduler.now();
    this.flight = this.send(rows).then(
      () => this.settled(),
      (err: unknown) => {
        this.logger.warn({ err, rows: rows.length }, 'progress report failed; the next report sends the latest values');
        this.settled();
      },
    );
  }

  private settled(): void {
    this.flight = undefined;
    this.arm();
  }
}
