import type { ClaimedRow, HeldPair, JobId } from '../db/types';
import { AttemptCancelledError, AttemptTimeoutError, JobCancelledError } from '../errors';
import type { Completion } from './executor';

/** Entry states: Claimed → Executing → Finalizing → removed (docs/DESIGN.md, "The pipeline inside one worker": Registry). */
export type EntryState = 'claimed' | 'executing' | 'finalizing';

/**
 * Why an attempt was aborted, carried as its AbortSignal's reason: its definition's timeout; its
 * attempt deadline (no renewal confirmed for 2.5 H); its lease lost (recovered or fenced); its job
 * cancelled by a client (client.cancel while it runs: the job ends Cancelled); the worker stopping gracefully (the row goes back uncharged); or the worker giving up (no heartbeat
 * for a whole lease, or a fatal error: the row is left to recovery).
 */
export const ABORT_CAUSES = ['timeout', 'deadline', 'lost', 'cancelled', 'shutdown', 'fatal'] as const;
export type AbortCause = (typeof ABORT_CAUSES)[number];

/**
 * The typed error of an aborted attempt's cause: what acta's own calls in a handler (ctx.step, its
 * waits and spawns) throw once it is aborted, never the signal's bare reason (a string), and what
 * the executor stores for a timeout, a deadline or a lost lease.
 */
export function abortedError(entry: Entry, timeoutMs?: number): Error {
  switch (entry.abortCause) {
    case 'timeout':
      return new AttemptTimeoutError(`attempt exceeded its timeout${timeoutMs === undefined ? '' : ` of ${timeoutMs} ms`}`);
    case 'deadline':
      return new AttemptTimeoutError('attempt deadline passed: its lease was not renewed in time');
    case 'lost':
      return new AttemptCancelledError('attempt cancelled: its lease was lost (recovered or fenced)');
    case 'cancelled':
      return new JobCancelledError(entry.row.id, 'job cancelled while it ran (client.cancel)');
    default:
      return new AttemptCancelledError('attempt cancelled: the worker is stopping');
  }
}

/** Throws abortedError when `entry` was aborted. */
export function throwIfAborted(entry: Entry): void {
  if (entry.abortCause !== undefined) throw abortedError(entry);
}

/**
 * One held claim. Its AbortController is made on first use (`controller`, `ctx.signal`): most
 * attempts end without anyone reading it, and a controller per job is an EventTarget and a
 * listener set up on the path every job takes
 * (docs/decisions/2026-11-30-abort-controller-on-first-use.md).
 * `aborted` and `abortCause` are the cheap checks.
 */
export class Entry {
  private current: EntryState = 'claimed';
  abortCause?: AbortCause;
  /** An executor has taken the entry (false: it is still in the claimer's hands). */
  taken = false;
  /**
   * The attempt reached Executing (its handler started). Recovery charges only such an attempt: one
   * that went from Claimed straight to Finalizing (a skipped fire, a hand-back, an expired claim)
   * never ran, and its retry must be judged as a first attempt again (docs/schedules.md, "Catch-up").
   */
  ran = false;

  get state(): EntryState {
    return this.current;
  }

  set state(next: EntryState) {
    this.current = next;
    if (next === 'executing') this.ran = true;
  }
  /**
   * The attempt's completion, from the moment it has one (state Finalizing) until its write is
   * answered (Registry.remove): what a fatal stop writes itself, as the attempt ended, when the
   * finalizer has not (fatalStop.ts).
   */
  completion?: Completion;
  /**
   * The attempt of the same job this worker held with its completion not yet answered when it
   * claimed this one (Registry.addClaimed): events$ tells this attempt's events only after that
   * attempt's end (events.ts).
   */
  follows?: Entry;
  /** Called once, with the cause, when the attempt is aborted (the executor's wait on its handler, or aroundHandlerStage.ts' wait for a run to start). */
  onAbort?: (cause: AbortCause) => void;
  /**
   * Scheduler times (ms) of the handler's start and end, recorded only while something reads them
   * (hooks, an events$ subscriber: src/worker/events.ts); -1: not recorded.
   */
  startedAt = -1;
  endedAt = -1;
  private abortController?: AbortController;

  constructor(
    readonly row: ClaimedRow,
    /** Scheduler time (ms) at which the attempt deadline fires unless a renewal re-arms it. */
    public deadlineAt: number,
    /** Scheduler time (ms) of the claim's answer. */
    readonly claimedAt = 0,
  ) {}

  /** Aborts the handler (its signal's reason is the cause); made on first use, already aborted if the attempt was. */
  get controller(): AbortController {
    if (!this.abortController) {
      this.abortController = new AbortController();
      if (this.abortCause !== undefined) this.abortController.abort(this.abortCause);
    }
    return this.abortController;
  }

  get aborted(): boolean {
    return this.abortCause !== undefined;
  }

  /** Aborts the attempt (once; the first cause wins). Use Registry.abort. */
  abort(cause: AbortCause): void {
    if (this.abortCause !== undefined) return;
    this.abortCause = cause;
    this.abortController?.abort(cause);
    const onAbort = this.onAbort;
    this.onAbort = undefined;
    onAbort?.(cause);
  }
}

/**
 * The in-flight registry: every claim is held from the moment it is taken until its completion
 * has committed. The heartbeat renews exactly what it holds.
 */
export class Registry {
  private readonly entries = new Map<JobId, Entry>();

  get size(): number {
    return this.entries.size;
  }

  /**
   * Adds freshly claimed rows in state Claimed with the given deadline. A row whose job this
   * worker already holds supersedes the old entry, which is aborted as lost (see isCurrent). Either
   * the old attempt's completion committed and the job was claimed again (a retry due at once, a
   * hand-back) before the write's answer was read: that completion is written as it was, and the
   * new entry follows it (events$ keeps the job's order: events.ts). Or the server lost the earlier
   * claim (a crash before its asynchronous commit was flushed: sql/functions/claim_jobs.sql) and
   * the new claim may carry the same (job, execution, holder): the old attempt's outcome is not
   * written (a completion waiting for its write is fenced out, a running attempt hands nothing on:
   * executor.ts). `claimedAt`: the scheduler time of the answer.
   */
  addClaimed(rows: ClaimedRow[], deadlineAt: number, claimedAt?: number): Entry[] {
    return rows.map((row) => {
      const previous = this.entries.get(row.id);
      let follows: Entry | undefined;
      if (previous) {
        this.abort(previous, 'lost');
        if (previous.completion) follows = previous;
        // The same execution number again: the claim that made `previous` did not last (an
        // asynchronous commit a server crash dropped), so its fence is this attempt's. Its completion
        // waiting for the write would land on this attempt: it is fenced out instead (execution 0
        // matches no Executing row; test/registry.spec.ts).
        if (previous.completion && previous.completion.row.execution === row.execution) previous.completion.row.execution = 0;
      }
      const entry = new Entry(row, deadlineAt, claimedAt);
      if (follows) entry.follows = follows;
      this.entries.set(row.id, entry);
      return entry;
    });
  }

  /** True while `entry` is the one held for its job (not removed, not superseded by a new claim). */
  isCurrent(entry: Entry): boolean {
    return this.entries.get(entry.row.id) === entry;
  }

  get(id: JobId): Entry | undefined {
    return this.entries.get(id);
  }

  /** Removes an entry once its completion has committed (or was fenced out), and lets go of its completion; a superseded one is already gone. */
  remove(entry: Entry): void {
    entry.completion = undefined;
    entry.follows = undefined;
    if (this.isCurrent(entry)) this.entries.delete(entry.row.id);
  }

  /** Every entry (a snapshot). */
  snapshot(): Entry[] {
    return [...this.entries.values()];
  }

  /** The (job, execution) pairs to renew: every entry, Claimed ones too (no row may lose its lease in a buffer). */
  heldPairs(entries = this.snapshot()): HeldPair[] {
    return entries.map((e) => ({ id: e.row.id, execution: e.row.execution, started: e.ran }));
  }

  /** Counts by state, for `acta_jobs_inflight{state}`. */
  countByState(): Record<EntryState, number> {
    const counts: Record<EntryState, number> = { claimed: 0, executing: 0, finalizing: 0 };
    for (const e of this.entries.values()) counts[e.state]++;
    return counts;
  }

  /** Aborts an entry's attempt (once; the first cause wins). */
  abort(entry: Entry, cause: AbortCause): void {
    entry.abort(cause);
  }
}
