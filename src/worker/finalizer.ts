import { BehaviorSubject, catchError, concat, defer, map, type Observable, type ObservableInput, type OperatorFunction, reduce, type SchedulerLike, Subject, take, takeUntil, tap, throwIfEmpty } from 'rxjs';
import type { Logger } from 'pino';
import { bufferBounded, retryBackoff } from '../../operators';
import { PIPELINE } from '../config';
import type { CompletionAck, CompletionRow } from '../db/types';
import type { Completion } from './executor';
import { errorJson } from './storedError';

/** Writes one batch of completion rows in one call (acta.complete_executions): a Promise or an Observable of the acks, in row order. */
export type WriteCompletions = (rows: CompletionRow[]) => ObservableInput<CompletionAck[]>;

/**
 * The fewest characters of results and errors in one batch for which node-postgres' encoding can
 * pass V8's longest string (2^29 − 24 characters): it quotes each text into one array literal, at
 * most doubling it (a backslash or a quote becomes two), so a batch of fewer than 2^28 characters
 * cannot; 2^27 leaves room for the literal's own quotes and commas.
 */
const ENCODABLE_CHARS = 2 ** 27;

/**
 * True when a write of `rows` failed for the values it carries: the database refused them
 * (SQLSTATE class 22 "data exception", e.g. 22P05 untranslatable character, 22021 bad byte
 * sequence; class 54 "program limit exceeded", e.g. a jsonb value too large), or the client could
 * not encode them: V8's RangeError "Invalid string length" from a batch of at least
 * ENCODABLE_CHARS characters (a result of ~500 million characters). Writing the same rows again
 * cannot succeed (repeated as it was, the batch would block every later completion of the worker
 * while the heartbeat kept the leases alive; test/finalizer.spec.ts), but the other rows can land. Any other error (a lost connection, a missing function, a
 * permission, another RangeError, e.g. a stack overflow in a Db wrapper or a failed allocation,
 * which a later try may not meet) says nothing about the rows and the call is repeated as it is.
 */
export function isContentError(err: unknown, rows: readonly CompletionRow[] = []): boolean {
  if (err instanceof RangeError) {
    if (!/Invalid string length/.test(err.message)) return false;
    let chars = 0;
    for (const row of rows) chars += (row.result?.length ?? 0) + (row.error?.length ?? 0);
    return chars >= ENCODABLE_CHARS;
  }
  const code = err !== null && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.length === 5 && (code.startsWith('22') || code.startsWith('54'));
}

export interface FinalizerConfig {
  write: WriteCompletions;
  /** Executor count N: the completed channel holds 128 + N (DESIGN.md, "Backpressure"). */
  executors: number;
  logger: Logger;
  /** Time source of the batch window and the write repeats (worker: its scheduler; tests: a TestScheduler). */
  scheduler: SchedulerLike;
  /** Uniform [0, 1) for the repeat jitter (default Math.random). */
  random?: () => number;
  /** After a batch committed (or was fenced out): registry removal, metrics, wakeups. */
  onWritten: (batch: Completion[], acks: CompletionAck[]) => void;
  onRetry?: (err: unknown, retry: number, delayMs: number) => void;
  /** Signs that the database is back (worker: the heartbeat succeeds again): a repeat waiting for its back-off is made at once. */
  retryNow$?: Observable<unknown>;
  /**
   * Whether completions may still come to fill a batch (worker: an attempt is running, or the
   * last claim came back full so the backlog goes on). While false the batch window ends at once:
   * it exists to gather completions on their way, and none are (default: always).
   */
  moreComing$?: Observable<boolean>;
}

/** A batch as written. */
export interface WrittenBatch {
  batch: Completion[];
  acks: CompletionAck[];
}

/**
 * The finalizer (docs/DESIGN.md, "Finalizer"): one per worker, an operator over the completions
 * (`completions$.pipe(finalizer.write)`). Completions wait in the completed channel;
 * `bufferBounded` reads one, then everything already waiting, up to 128
 * completions or 4 MiB of result bytes, waiting up to 50 ms more only when the first read found
 * a backlog (a lone completion is written at once) and only while `moreComing$` says so (at the
 * end of a backlog nothing can fill the batch), and hands each batch to ONE complete_executions
 * call, the next only after the previous one landed. The output emits each batch once written and
 * completes once the completions have completed and everything is written.
 *
 * The write repeats until it lands: 1 s, 2 s, 4 s, ... capped at 30 s, each ±25 %, and at once on
 * `retryNow$`; logged as a warning for the first three repeats, then as an error; `abandon()`
 * gives up (shutdown). A
 * batch the database refuses for its content ({@link isContentError}) is bisected: each half is
 * written on its own, so the clean completions land, and a single completion it refuses is
 * rewritten as failed_final with an `UnstorableOutcome` error and no result (an outcome that
 * cannot be stored at all ends the job failed without new attempts: test/faults/completion.test.ts). A part that
 * landed is never written again: only the call that failed is repeated.
 *
 * Backpressure: `intakeOpen$` (starts true) turns false when the channel holds 128 + N
 * completions not yet committed (N = executors) and true again as soon as a write brings it
 * below that; the claimer stops claiming meanwhile.
 */
export class Finalizer {
  private pending = 0;
  private readonly capacity: number;
  private readonly intake = new BehaviorSubject<boolean>(true);
  private readonly giveUp = new Subject<void>();
  readonly intakeOpen$: Observable<boolean> = this.intake.asObservable();

  constructor(private readonly config: FinalizerConfig) {
    this.capacity = PIPELINE.batchMaxCount + config.executors;
  }

  /** Completions handed over and not yet committed. */
  get backlog(): number {
    return this.pending;
  }

  /** The operator: writes `completions` in batches; subscribe once. */
  readonly write: OperatorFunction<Completion, WrittenBatch> = (completions) =>
    completions.pipe(
      tap(() => {
        this.pending++;
        this.updateIntake();
      }),
      bufferBounded((batch: Completion[]) => this.writeBatch(batch), {
        maxCount: PIPELINE.batchMaxCount,
        maxBytes: PIPELINE.batchMaxBytes,
        maxWaitMs: PIPELINE.batchWindowMs,
        sizeOf: (c) => c.bytes,
        scheduler: this.config.scheduler,
        moreComing$: this.config.moreComing$,
      }),
      takeUntil(this.giveUp),
    );

  /** Stops repeating failed writes (shutdown timeout): the output completes now. */
  abandon(): void {
    this.giveUp.next();
  }

  private updateIntake(): void {
    const open = this.pending < this.capacity;
    if (open !== this.intake.value) this.intake.next(open);
  }

  private writeBatch(batch: Completion[]): Observable<WrittenBatch> {
    // A row written in another's place (writeRows: failed_final) becomes its completion's: what
    // onWritten tells (events$, metrics) and a fatal stop writes is what the ledger holds
    // (test/events.spec.ts, "refuses for its content").
    const replaced = (original: CompletionRow, replacement: CompletionRow) => {
      const completion = batch.find((c) => c.row === original);
      if (completion) completion.row = replacement;
    };
    return this.writeRows(batch.map((c) => c.row), replaced).pipe(
      map((acks) => {
        this.pending -= batch.length;
        this.updateIntake();
        this.config.onWritten(batch, acks);
        return { batch, acks };
      }),
    );
  }

  /**
   * Writes `rows` (one call, repeated until it lands); if the database refuses them for their
   * content, writes each half on its own, and a single refused row as failed_final. Never errors.
   */
  private writeRows(rows: CompletionRow[], replaced: (original: CompletionRow, replacement: CompletionRow) => void): Observable<CompletionAck[]> {
    const { logger } = this.config;
    return this.call(rows, (err) => !isContentError(err, rows)).pipe(
      catchError((err: unknown) => {
        if (rows.length > 1) {
          logger.warn({ err, batchSize: rows.length }, 'completion batch refused for its content; writing each half on its own');
          const half = Math.ceil(rows.length / 2);
          return concat(this.writeRows(rows.slice(0, half), replaced), this.writeRows(rows.slice(half), replaced)).pipe(
            reduce((all: CompletionAck[], acks: CompletionAck[]) => all.concat(acks), []),
          );
        }
        const [row] = rows;
        logger.error({ err, jobId: row.id, execution: row.execution, outcome: row.outcome }, 'outcome cannot be stored: job fails without retry');
        const replacement: CompletionRow = { ...row, outcome: 'failed_final', result: null, error: errorJson(err, 'UnstorableOutcome'), retryDelayMs: 0 };
        replaced(row, replacement);
        return this.call([replacement], () => true);
      }),
    );
  }

  /** One complete_executions call, repeated with back-off while `repeat(err)` holds; an answer without acks counts as a failure. */
  private call(rows: CompletionRow[], repeat: (err: unknown) => boolean): Observable<CompletionAck[]> {
    const { logger } = this.config;
    return defer(() => this.config.write(rows)).pipe(
      take(1),
      throwIfEmpty(() => new Error('complete_executions answered nothing')),
      retryBackoff<CompletionAck[]>({
        initialMs: PIPELINE.writeRetryInitialMs,
        maxMs: PIPELINE.writeRetryMaxMs,
        jitter: PIPELINE.writeRetryJitter,
        random: this.config.random,
        scheduler: this.config.scheduler,
        retryNow$: this.config.retryNow$,
        shouldRetry: repeat,
        onRetry: (err, retry, delayMs) => {
          const level = retry <= PIPELINE.writeRetryWarnings ? 'warn' : 'error';
          logger[level]({ err, retry, delayMs, batchSize: rows.length }, 'completion write failed; repeating');
          this.config.onRetry?.(err, retry, delayMs);
        },
      }),
    );
  }
}
