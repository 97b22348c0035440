import { type Observable, type Subscription, VirtualAction, VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { ConfigError } from '../errors';

/**
 * Virtual time for code that mixes scheduled work with promises (docs/rx.md, "Testing in virtual
 * time"). RxJS's TestScheduler runs its actions in one synchronous flush, so a promise resolved by
 * a scheduled action (an in-memory ledger's answer, an async handler) settles only after the whole
 * flush, and the time it stood for is lost. `advance(ms)` runs the scheduled actions in time order,
 * and after each instant lets promises settle before it runs the next: an answer due at 5 ms is
 * handled at 5 ms, and whatever it schedules then runs at its own time.
 *
 * A handler under virtual time must take its time from the scheduler too (an RxJS timer on
 * `clock.scheduler`); a real `setTimeout` in it runs in real time.
 */
export class VirtualClock {
  readonly scheduler = new VirtualTimeScheduler(VirtualAction, Infinity);

  /** Virtual ms since the clock was made. */
  now(): number {
    return this.scheduler.now();
  }

  /**
   * Moves time `ms` on (an integer ≥ 0, else ConfigError), running every action due meanwhile at its
   * own time, with promises settled before and after each instant. Resolves at the new time.
   */
  async advance(ms: number): Promise<void> {
    if (!Number.isInteger(ms) || ms < 0) throw new ConfigError(`advance(ms): ms must be an integer ≥ 0, got ${ms}`);
    const target = this.scheduler.frame + ms;
    await settle();
    for (let next = this.nextAt(); next !== undefined && next <= target; next = this.nextAt()) {
      this.scheduler.maxFrames = next;
      this.scheduler.flush();
      await settle();
    }
    this.scheduler.maxFrames = Infinity;
    this.scheduler.frame = target;
  }

  /**
   * Advances in steps of `stepMs` (an integer ≥ 1, default 1) until `done()` holds, at most `maxMs`
   * (an integer ≥ 0 or Infinity, default 60,000) of virtual time; resolves with the virtual time it took,
   * rejects when `maxMs` passed first (a bad option: ConfigError).
   */
  async advanceUntil(done: () => boolean, options: { stepMs?: number; maxMs?: number } = {}): Promise<number> {
    return this.until('advanceUntil', done, options);
  }

  /**
   * Advances until `promise` settles (in steps of `stepMs`, default 1; at most `maxMs` of virtual
   * time, default 60,000) and resolves or rejects as it does. For a call whose answer comes on this
   * clock, such as a memoryLedger's: `await clock.await(client.enqueue(job, payload))`. (A plain
   * `await` of it would wait for virtual time that never moves.)
   */
  async await<T>(promise: Promise<T>, options: { stepMs?: number; maxMs?: number } = {}): Promise<T> {
    let settled = false;
    const watched = promise.finally(() => {
      settled = true;
    });
    watched.catch(() => undefined); // rejections are the caller's, from the await below
    await this.until('await', () => settled, options);
    return watched;
  }

  /**
   * advanceUntil's loop, its errors named after the method called. A step of 0 (or NaN) never
   * moves time and a NaN bound is never reached: both would loop for ever, so they are refused
   * (test/testing/virtualClock.spec.ts).
   */
  private async until(method: 'advanceUntil' | 'await', done: () => boolean, options: { stepMs?: number; maxMs?: number }): Promise<number> {
    if (options === null || typeof options !== 'object') throw new ConfigError(`${method}: options must be an object of stepMs, maxMs, got ${String(options)}`);
    const step = options.stepMs ?? 1;
    const max = options.maxMs ?? 60_000;
    if (!Number.isInteger(step) || step < 1) throw new ConfigError(`${method}: stepMs must be an integer ≥ 1, got ${step}`);
    if (!(Number.isInteger(max) && max >= 0) && max !== Infinity) throw new ConfigError(`${method}: maxMs must be an integer ≥ 0 (or Infinity), got ${max}`);
    const start = this.now();
    await settle();
    while (!done()) {
      if (this.now() - start >= max) throw new Error(method === 'await' ? `await: the promise did not settle within ${max} virtual ms` : `advanceUntil: not done after ${max} virtual ms`);
      await this.advance(step);
    }
    return this.now() - start;
  }

  /** Records each value `source$` emits with the virtual time it came at, and its end, until unsubscribed. */
  record<T>(source$: Observable<T>): Recording<T> {
    const recording: Recording<T> = { entries: [], subscription: undefined as unknown as Subscription };
    recording.subscription = source$.subscribe({
      next: (value) => recording.entries.push({ at: this.now(), value }),
      error: (error: unknown) => (recording.error = { at: this.now(), error }),
      complete: () => (recording.completedAt = this.now()),
    });
    return recording;
  }

  private nextAt(): number | undefined {
    const first = this.scheduler.actions[0] as VirtualAction<unknown> | undefined;
    return first === undefined ? undefined : (first as unknown as { delay: number }).delay;
  }
}

/** What `VirtualClock.record` keeps. */
export interface Recording<T> {
  entries: { at: number; value: T }[];
  /** When and with what the source errored (an error is kept here, not thrown). */
  error?: { at: number; error: unknown };
  /** When the source completed. */
  completedAt?: number;
  subscription: Subscription;
}

/**
 * Lets every promise already settled run its continuations: the microtask queue drains before the
 * next turn of the event loop, however long the chain. Three turns, for a continuation that defers
 * itself to the next turn (setImmediate).
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A marble diagram as the entries a Recording holds: each value at its frame, one frame per virtual
 * ms, with RxJS's run-mode syntax (`-` one frame, `a 9ms b` time progression, `(ab)` values of one
 * instant; rxjs/testing's TestScheduler.parseMarbles). So `expect(recording.entries).toEqual(
 * fromMarbles('a 9ms b', { a: 1, b: 2 }))` checks values and their virtual times. Completion and
 * error markers (`|`, `#`) are ignored: a Recording keeps values only.
 */
export function fromMarbles<T>(marbles: string, values?: Record<string, T>): { at: number; value: T }[] {
  // One frame per character, as TestScheduler.run sets it while it runs.
  const factor = TestScheduler.frameTimeFactor;
  TestScheduler.frameTimeFactor = 1;
  try {
    return TestScheduler.parseMarbles(marbles, values, undefined, false, true)
      .filter((m) => m.notification.kind === 'N')
      .map((m) => ({ at: m.frame, value: (m.notification as { value: T }).value }));
  } finally {
    TestScheduler.frameTimeFactor = factor;
  }
}
