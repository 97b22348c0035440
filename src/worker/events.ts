import { type Observable, Subject } from 'rxjs';
import type { CompletionAck, CompletionOutcome, JobId } from '../db/types';
import type { Completion } from './executor';
import type { Entry } from './registry';
import { storedErrorSummary } from './storedError';

/** The fields every per-attempt event carries. Times are ms on the worker's scheduler (monotonic by default). */
export interface AttemptEventFields {
  readonly jobId: JobId;
  readonly definition: string;
  /** 1-based: the attempts charged before this one + 1 (the handler's `ctx.attempt`). */
  readonly attempt: number;
  /** The fence: how many times the job has been claimed. */
  readonly execution: number;
  /** The job's payload (the handler's object, not a copy): only with `events: { payloads: true }`. */
  readonly payload?: unknown;
}

/** One claim call: the claim statistics (acta_claim_rows_asked_total, acta_claim_rows_claimed_total, acta_claim_duration_seconds). */
export interface ClaimedEvent {
  readonly type: 'claimed';
  /** Rows asked for: the free executor permits. */
  readonly asked: number;
  /** Rows the claim took. */
  readonly got: number;
  /** asked − got: permits the claim could not use (nothing due, or another worker took the rows). */
  readonly wasted: number;
  /** The claim call's round trip, ms. */
  readonly durationMs: number;
}

/** The handler is starting. */
export interface StartedEvent extends AttemptEventFields {
  readonly type: 'started';
  /** From the claim's answer to this start, ms: time in admission, hooks and the executor wait (the enqueue time is not known to the worker). */
  readonly waitedMs: number;
}

/** The attempt's success was written. */
export interface SucceededEvent extends AttemptEventFields {
  readonly type: 'succeeded';
  /** The handler's run time, ms; null when the start was not recorded (nobody listened then). */
  readonly runMs: number | null;
}

/** The attempt's failure was written. */
export interface FailedEvent extends AttemptEventFields {
  readonly type: 'failed';
  /** true: the job is Ready again, due after `retryDelayMs`; false: the job is Failed. */
  readonly retry: boolean;
  readonly retryDelayMs?: number;
  /** The stored error's name and message. */
  readonly error: { readonly name: string; readonly message: string };
  readonly runMs: number | null;
}

/** The attempt went back to Ready uncharged, and that was written. */
export interface HandedBackEvent extends AttemptEventFields {
  readonly type: 'handed_back';
  /** `shutdown`: the worker is stopping (a stop, or one it made itself); `expired`: the claim reached the handler after its deadline; `hook`: a hook handed it back. */
  readonly reason: 'shutdown' | 'expired' | 'hook';
  /** Set when a stop cut a running handler short. */
  readonly runMs: number | null;
}

/** The handler called `ctx.rateLimited`, and that was written: Ready again uncharged, due after `retryAfterMs`, its rate meter held shut until then. */
export interface RateLimitedEvent extends AttemptEventFields {
  readonly type: 'rate_limited';
  readonly retryAfterMs: number;
  readonly runMs: number | null;
}

/** The handler waited (ctx.waitForSignal, ctx.waitForChildren), and that was written: the job is parked, uncharged (docs/workflows.md). */
export interface WaitingEvent extends AttemptEventFields {
  readonly type: 'waiting';
  readonly waitingFor: 'signal' | 'children';
  readonly runMs: number | null;
}

/** A client cancelled the job while this attempt ran (client.cancel), and its end was written: the job is Cancelled. */
export interface CancelledEvent extends AttemptEventFields {
  readonly type: 'cancelled';
  readonly runMs: number | null;
}

/** A completion was fenced out: the row had moved on (another execution owns it), nothing was written. */
export interface StaleEvent extends AttemptEventFields {
  readonly type: 'stale';
  /** What the completion would have written. */
  readonly outcome: CompletionOutcome;
}

/** The heartbeat found the attempt's lease lost (recovered or fenced): its handler is aborted, its completion will be fenced out. */
export interface LeaseLostEvent extends AttemptEventFields {
  readonly type: 'lease_lost';
  /** Whether the handler had started. */
  readonly started: boolean;
}

/** The worker claims nothing while the heartbeat fails (`heartbeat`), or relies on the safety poll while LISTEN is down (`listener`). */
export interface DegradedEvent {
  readonly type: 'degraded';
  readonly cause: 'heartbeat' | 'listener';
}

/** The heartbeat succeeds again, or LISTEN is in effect again. */
export interface RecoveredEvent {
  readonly type: 'recovered';
  readonly cause: 'heartbeat' | 'listener';
}

/** The worker registered and its pipeline runs. */
export interface RunningEvent {
  readonly type: 'running';
  readonly workerId: string;
  readonly namespace: string;
}

/** The last event: the worker stopped (`error`: it stopped itself, and `done` rejected with it). events$ completes after it. */
export interface StoppedEvent {
  readonly type: 'stopped';
  readonly workerId: string;
  readonly error?: unknown;
}

/** What a worker tells about itself (`worker.events$`, `runWorker$`): a union discriminated by `type`. */
export type WorkerEvent = ClaimedEvent | StartedEvent | SucceededEvent | FailedEvent | HandedBackEvent | RateLimitedEvent | WaitingEvent | CancelledEvent | StaleEvent | LeaseLostEvent | DegradedEvent | RecoveredEvent | RunningEvent | StoppedEvent;

/** Options of a worker's events: `payloads` puts each job's payload on its per-attempt events (default false). */
export interface WorkerEventsOptions {
  payloads?: boolean;
}

/**
 * A worker's events (docs/reference.md, "Events"). Every method builds its event only while
 * events$ has a subscriber (`Subject.observed`): with none, the worker's hot path pays one
 * property read per claim, per handler start and per written batch.
 *
 * A job's events come in its order: an attempt's end before anything of the job's next attempt.
 * The write that ends an attempt can make the job due at once (a retry after 0 ms, a hand-back)
 * and NOTIFY as it commits, so a claim on another connection can take the job again and start it
 * before the write's answer is read. Such an entry follows the old one (Entry.follows, set by
 * Registry.addClaimed), and its events wait here, keyed by the old entry, until the old
 * attempt's end is told (or the worker stops). The finalizer writes in the order completions
 * came, so the old end is told before the new attempt's own (test/events.spec.ts).
 */
export class WorkerEvents {
  private readonly subject = new Subject<WorkerEvent>();
  readonly events$: Observable<WorkerEvent> = this.subject.asObservable();
  /** Events held behind an attempt whose end is not told yet, keyed by that attempt's entry. */
  private readonly held = new Map<Entry, WorkerEvent[]>();

  constructor(private readonly options: WorkerEventsOptions = {}) {}

  /** Someone listens: worth recording times and building events. */
  get observed(): boolean {
    return this.subject.observed;
  }

  claimed(asked: number, got: number, durationMs: number): void {
    if (this.subject.observed) this.subject.next({ type: 'claimed', asked, got, wasted: asked - got, durationMs });
  }

  started(entry: Entry): void {
    if (this.subject.observed) this.tell(entry, { type: 'started', ...this.fields(entry), waitedMs: entry.startedAt - entry.claimedAt });
  }

  /** A batch as written (the finalizer's onWritten): one event per completion. */
  written(batch: readonly Completion[], acks: readonly (CompletionAck | undefined)[]): void {
    if (!this.subject.observed) {
      this.held.clear(); // nobody to tell them to
      return;
    }
    for (let i = 0; i < batch.length; i++) {
      const { entry } = batch[i];
      this.tell(entry, this.ended(batch[i], acks[i]));
      if (this.held.size === 0) continue;
      const after = this.held.get(entry);
      if (after === undefined) continue;
      this.held.delete(entry);
      for (const event of after) this.subject.next(event);
    }
  }

  leaseLost(entry: Entry): void {
    if (this.subject.observed) this.tell(entry, { type: 'lease_lost', ...this.fields(entry), started: entry.state !== 'claimed' });
  }

  /** The heartbeat's or the listener's health changed. */
  health(cause: 'heartbeat' | 'listener', ok: boolean): void {
    if (this.subject.observed) this.subject.next({ type: ok ? 'recovered' : 'degraded', cause });
  }

  running(workerId: string, namespace: string): void {
    if (this.subject.observed) this.subject.next({ type: 'running', workerId, namespace });
  }

  /** The last event, after any still held (their job's write never answered); events$ completes. */
  stopped(workerId: string, error?: unknown): void {
    for (const after of this.held.values()) for (const event of after) this.subject.next(event);
    this.held.clear();
    this.subject.next(error === undefined ? { type: 'stopped', workerId } : { type: 'stopped', workerId, error });
    this.subject.complete();
  }

  /** Emits `event` of `entry`'s attempt, or holds it while the attempt its entry follows has not had its end told. */
  private tell(entry: Entry, event: WorkerEvent): void {
    const follows = entry.follows;
    if (follows !== undefined) {
      if (follows.completion !== undefined) {
        const after = this.held.get(follows);
        if (after) after.push(event);
        else this.held.set(follows, [event]);
        return;
      }
      entry.follows = undefined;
    }
    this.subject.next(event);
  }

  /** The event of a written completion. */
  private ended({ entry, row }: Completion, ack: CompletionAck | undefined): WorkerEvent {
    const fields = this.fields(entry);
    if (!ack || ack.status === 'stale') return { type: 'stale', ...fields, outcome: row.outcome };
    const runMs = entry.startedAt >= 0 && entry.endedAt >= 0 ? entry.endedAt - entry.startedAt : null;
    if (ack.status === 'cancelled') return { type: 'cancelled', ...fields, runMs };
    switch (row.outcome) {
      case 'succeeded':
        return { type: 'succeeded', ...fields, runMs };
      case 'failed':
      case 'failed_final': {
        const retry = ack.status === 'ready';
        const error = storedErrorSummary(row.error) ?? { name: 'Error', message: '' };
        return { type: 'failed', ...fields, retry, ...(retry ? { retryDelayMs: row.retryDelayMs } : {}), error, runMs };
      }
      case 'signal_wait':
      case 'children_wait':
        return { type: 'waiting', ...fields, waitingFor: row.outcome === 'signal_wait' ? 'signal' : 'children', runMs };
      case 'rate_limited':
        return { type: 'rate_limited', ...fields, retryAfterMs: row.retryDelayMs, runMs };
      default: {
        const reason = row.outcome === 'expired' ? 'expired' : entry.abortCause === 'shutdown' || entry.abortCause === 'fatal' ? 'shutdown' : 'hook';
        return { type: 'handed_back', ...fields, reason, runMs };
      }
    }
  }

  private fields(entry: Entry): AttemptEventFields {
    const { row } = entry;
    const fields = { jobId: row.id, definition: row.definition, attempt: row.attempts + 1, execution: row.execution };
    return this.options.payloads ? { ...fields, payload: row.payload } : fields;
  }
}
