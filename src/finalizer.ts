import { BehaviorSubject, defer, type Observable, type SchedulerLike, Subject, takeUntil } from 'rxjs';
import type { Logger } from 'pino';
import { bufferBounded, retryBackoff } from '../operators';
import { PIPELINE } from './config';
import type { CompletionAck, CompletionRow } from './db/functions';
import { isTransientDbError } from './db/transient';
import type { Completion } from './executor';
import { errorJson } from './executor';

/** Writes one batch of completion rows in one call (acta.complete_executions). */
export type WriteCompletions = (rows: CompletionRow[]) => Promise<CompletionAck[]>;

export interface FinalizerConfig {
  write: WriteCompletions;
  /** Executor count N: the completed channel holds 128 + N (DESIGN.md, "Backpressure"). */
  executors: number;
  logger: Logger;
  scheduler: SchedulerLike;
  random?: () => number;
  /** After a batch committed (or was fenced out): registry removal, metrics, wakeups. */
  onWritten: (batch: Completion[], acks: CompletionAck[]) => void;
  onRetry?: (err: unknown, retry: number, delayMs: number) => void;
}

/** A batch as written. */
export interface WrittenBatch {
  batch: Completion[];
  acks: CompletionAck[];
}

/**
 * The finalizer (shared/DESIGN.md, "Finalizer"): one per worker. Completions wait in the
 * completed channel; `bufferBounded` reads one, then everything already waiting, up to 128 or
 * 4 MiB, waiting up to 50 ms more only when the first read found a backlog, and hands each batch
 * to ONE complete_executions call. The write repeats until it lands (1 s → 30 s, ±25 %; Warning
 * for three tries, then Error) or the worker gives up at shutdown. A batch that the database
 * refuses for its content (not a transient error) is split to find the rows it cannot store;
 * those end Failed without retry and the rest land.
 *
 * `intakeOpen$` is false while the channel holds 128 + N completions or more (not yet committed):
 * the claimer stops claiming until it drains.
 */
export class Finalizer {
  private readonly channel = new Subject<Completion>();
  private pending = 0;
  private readonly capacity: number;
  private readonly intake = new BehaviorSubject<boolean>(true);
  private readonly giveUp = new Subject<void>();
  readonly intakeOpen$: Observable<boolean> = this.intake.asObservable();
  /** The finalizer's output; subscribe once. Completes after `close()` once everything is written. */
  readonly written$: Observable<WrittenBatch>;

  constructor(private readonly config: FinalizerConfig) {
    this.capacity = PIPELINE.batchMaxCount + config.executors;
    this.written$ = this.channel.pipe(
      bufferBounded((batch: Completion[]) => this.writeBatch(batch), {
        maxCount: PIPELINE.batchMaxCount,
        maxBytes: PIPELINE.batchMaxBytes,
        maxWaitMs: PIPELINE.batchWindowMs,
        sizeOf: (c) => c.bytes,
        scheduler: config.scheduler,
      }),
      takeUntil(this.giveUp),
    );
  }

  /** Completions handed over and not yet committed. */
  get backlog(): number {
    return this.pending;
  }

  /** An executor hands over a completion. */
  push(completion: Completion): void {
    this.pending++;
    this.updateIntake();
    this.channel.next(completion);
  }

  /** No more completions: written$ completes once the channel is written out. */
  close(): void {
    this.channel.complete();
  }

  /** Stops repeating failed writes (shutdown timeout): written$ completes now. */
  abandon(): void {
    this.giveUp.next();
  }

  private updateIntake(): void {
    const open = this.pending < this.capacity;
    if (open !== this.intake.value) this.intake.next(open);
  }

  private writeBatch(batch: Completion[]): Observable<WrittenBatch> {
    const { logger } = this.config;
    return defer(async () => {
      const acks = await this.writeSplitting(batch.map((c) => c.row));
      this.pending -= batch.length;
      this.updateIntake();
      this.config.onWritten(batch, acks);
      return { batch, acks };
    }).pipe(
      retryBackoff<WrittenBatch>({
        initialMs: PIPELINE.writeRetryInitialMs,
        maxMs: PIPELINE.writeRetryMaxMs,
        jitter: PIPELINE.writeRetryJitter,
        random: this.config.random,
        scheduler: this.config.scheduler,
        onRetry: (err, retry, delayMs) => {
          const level = retry <= PIPELINE.writeRetryWarnings ? 'warn' : 'error';
          logger[level]({ err, retry, delayMs, batchSize: batch.length }, 'completion write failed; repeating');
          this.config.onRetry?.(err, retry, delayMs);
        },
      }),
    );
  }

  /**
   * One call for the batch; if the database refuses it for its content, bisect to find the rows
   * it cannot store, and write those as failed_final with a readable error. Transient errors
   * propagate (the whole batch is repeated).
   */
  private async writeSplitting(rows: CompletionRow[]): Promise<CompletionAck[]> {
    try {
      return await this.config.write(rows);
    } catch (err) {
      if (isTransientDbError(err)) throw err;
      if (rows.length > 1) {
        const half = Math.ceil(rows.length / 2);
        return [...(await this.writeSplitting(rows.slice(0, half))), ...(await this.writeSplitting(rows.slice(half)))];
      }
      const [row] = rows;
      if (row.outcome === 'failed_final' && row.result === null && row.error !== null && row.error.includes('UnstorableOutcome')) throw err;
      this.config.logger.error({ err, jobId: row.id }, 'outcome cannot be stored: job fails without retry');
      const replacement: CompletionRow = { ...row, outcome: 'failed_final', result: null, error: errorJson(err, 'UnstorableOutcome'), retryDelayMs: 0 };
      return this.config.write([replacement]);
    }
  }
}
