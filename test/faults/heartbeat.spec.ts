/**
 * The heartbeat's lease clock in virtual time (jest fake timers drive asyncScheduler and Date;
 * the database call is a stub): renewals re-arm deadlines, locked rows keep theirs, lost rows are
 * cancelled, failing or hanging beats stop claims and, after a whole lease, the worker; a stall
 * alone does not.
 */
import pino from 'pino';
import { asyncScheduler, type Observable, Subject, type Subscription } from 'rxjs';
import { type LeaseClock, leaseClock } from '../../src/config';
import type { ClaimedRow, HeartbeatResult, HeldPair } from '../../src/db/types';
import { SchemaNotMigratedError } from '../../src/errors';
import { beatRetryDelayMs, heartbeat, HeartbeatLostError, lastTryMarginMs } from '../../src/worker/heartbeat';
import { Registry } from '../../src/worker/registry';

const H = 1000;
const clock = leaseClock(H);
const logger = pino({ level: 'silent' });

const row = (id: string): ClaimedRow => ({ id, definition: 'd', payload: {}, execution: 1, attempts: 0, maxAttempts: 5, unchargedReturns: 0, priority: 0 });
const answer = (held: HeldPair[], state: 'renewed' | 'locked' | 'lost'): HeartbeatResult => ({
  renewed: state === 'renewed' ? held : [],
  locked: state === 'locked' ? held : [],
  lost: state === 'lost' ? held : [],
  cancel: [],
  duePasses: [],
});
const transient = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

let subscription: Subscription | undefined;
beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
afterEach(() => {
  subscription?.unsubscribe();
  jest.useRealTimers();
});

/** Runs the heartbeat on asyncScheduler, which the fake timers drive (and Date with them). */
const run = (beat: (held: HeldPair[]) => Promise<HeartbeatResult>, registry = new Registry(), options: { clock?: LeaseClock; reachable$?: Observable<unknown>; listening$?: Observable<unknown>; logger?: pino.Logger } = {}) => {
  const health: boolean[] = [];
  const fatal: unknown[] = [];
  const calls: HeldPair[][] = [];
  subscription = heartbeat({
    registry,
    clock: options.clock ?? clock,
    reachable$: options.reachable$,
    listening$: options.listening$,
    beat: (held) => {
      calls.push(held);
      return beat(held);
    },
    startPass: () => undefined,
    onHealth: (ok) => health.push(ok),
    onFatal: (err) => fatal.push(err),
    logger: options.logger ?? logger,
    scheduler: asyncScheduler,
    startedAt: Date.now(),
  }).subscribe();
  return { registry, health, fatal, calls };
};

test('the first beat comes H after the start; one call per beat carries every held pair, Claimed ones too; a renewal re-arms the deadline from the beat start', async () => {
  const registry = new Registry();
  const [a, b] = registry.addClaimed([row('1'), row('2')], Date.now() + clock.attemptDeadlineMs);
  a.state = 'executing';
  a.taken = true;
  const t = run(async (held) => answer(held, 'renewed'), registry);
  // The registration was the first beat (register_worker.sql): the next comes H after it.
  await jest.advanceTimersByTimeAsync(H - 1);
  expect(t.calls).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(t.calls).toEqual([[{ id: '1', execution: 1, started: true }, { id: '2', execution: 1, started: false }]]);
  await jest.advanceTimersByTimeAsync(10 * H);
  expect(t.calls).toHaveLength(11);
  expect(a.deadlineAt).toBe(Date.now() + clock.attemptDeadlineMs);
  expect(b.deadlineAt).toBe(a.deadlineAt);
  expect(a.controller.signal.aborted).toBe(false);
  expect(t.health).toEqual([]);
  expect(t.fatal).toEqual([]);
});

test('a locked row keeps its deadline: the attempt is aborted 2.5 H after its last confirmed renewal', async () => {
  const registry = new Registry();
  const [a] = registry.addClaimed([row('1')], Date.now() + clock.attemptDeadlineMs);
  a.state = 'executing';
  a.taken = true;
  run(async (held) => answer(held, 'locked'), registry);
  await jest.advanceTimersByTimeAsync(2.5 * H - 10);
  expect(a.controller.signal.aborted).toBe(false);
  await jest.advanceTimersByTimeAsync(H / 4 + 10);
  expect(a.abortCause).toBe('deadline');
});

test('a lost row cancels a Claimed or Executing attempt, leaves a Finalizing one to its write, and drops an untaken claim', async () => {
  const registry = new Registry();
  const [executing, finalizing, untaken] = registry.addClaimed([row('1'), row('2'), row('3')], Date.now() + clock.attemptDeadlineMs);
  executing.state = 'executing';
  executing.taken = true;
  finalizing.state = 'finalizing';
  finalizing.taken = true;
  run(async (held) => answer(held, 'lost'), registry);
  await jest.advanceTimersByTimeAsync(H); // the first beat
  expect(executing.abortCause).toBe('lost');
  expect(finalizing.controller.signal.aborted).toBe(false);
  expect(untaken.abortCause).toBe('lost');
  expect(registry.snapshot().map((e) => e.row.id)).toEqual(['1', '2']);
});

test('LISTEN coming up beats at once while attempts are held (a cancel sent before it listened is found then), not when none are', async () => {
  const listening$ = new Subject<void>();
  const registry = new Registry();
  const t = run(async (held) => answer(held, 'renewed'), registry, { listening$ });
  await jest.advanceTimersByTimeAsync(H / 4);
  listening$.next(); // holds nothing: no beat
  await jest.advanceTimersByTimeAsync(1);
  expect(t.calls).toEqual([]);
  const [a] = registry.addClaimed([row('1')], Date.now() + clock.attemptDeadlineMs);
  a.state = 'executing';
  a.taken = true;
  listening$.next();
  await jest.advanceTimersByTimeAsync(1);
  expect(t.calls).toEqual([[{ id: '1', execution: 1, started: true }]]);
  // The beats every H go on from the start.
  await jest.advanceTimersByTimeAsync(H - H / 4 - 2);
  expect(t.calls).toHaveLength(2);
});

/** A registry holding one attempt whose handler runs (an Executing entry). */
const holding = () => {
  const registry = new Registry();
  const [entry] = registry.addClaimed([row('1')], Date.now() + clock.attemptDeadlineMs);
  entry.state = 'executing';
  entry.taken = true;
  return { registry, entry };
};

test('failing beats: claims stop at the first failure, resume on success; a whole lease of failures stops a worker that holds attempts', async () => {
  let failing = false;
  const t = run(async (held) => {
    if (failing) throw transient();
    return answer(held, 'renewed');
  }, holding().registry);
  await jest.advanceTimersByTimeAsync(H); // the first beat
  failing = true;
  await jest.advanceTimersByTimeAsync(H);
  expect(t.health).toEqual([false]);
  failing = false;
  await jest.advanceTimersByTimeAsync(H);
  expect(t.health).toEqual([false, true]);
  const lastSuccess = Date.now();
  failing = true;
  await jest.advanceTimersByTimeAsync(clock.leaseMs - H);
  expect(t.fatal).toEqual([]);
  await jest.advanceTimersByTimeAsync(2 * H);
  expect(t.fatal).toHaveLength(1);
  expect(t.fatal[0]).toBeInstanceOf(HeartbeatLostError);
  expect((t.fatal[0] as HeartbeatLostError).sinceMs).toBeGreaterThanOrEqual(clock.leaseMs);
  expect(Date.now() - lastSuccess).toBeLessThan(clock.leaseMs + 2 * H);
  await jest.advanceTimersByTimeAsync(10 * H);
  expect(t.fatal).toHaveLength(1);
});

test('a beat that hangs counts as failing: no claims after H, and a worker that holds attempts stops after a lease', async () => {
  let hang = false;
  const t = run((held) => (hang ? new Promise<HeartbeatResult>(() => undefined) : Promise.resolve(answer(held, 'renewed'))), holding().registry);
  await jest.advanceTimersByTimeAsync(H); // the first beat
  hang = true;
  await jest.advanceTimersByTimeAsync(2 * H + H / 4);
  expect(t.health).toEqual([false]);
  await jest.advanceTimersByTimeAsync(3 * H);
  expect(t.fatal).toHaveLength(1);
  expect(t.fatal[0]).toBeInstanceOf(HeartbeatLostError);
});

test('a stall longer than the lease is not a heartbeat failure: the next beat decides, and a passed deadline aborts', async () => {
  const registry = new Registry();
  const [a] = registry.addClaimed([row('1')], Date.now() + clock.attemptDeadlineMs);
  a.state = 'executing';
  a.taken = true;
  let stalled = false;
  // Before the stall the row is renewed; meanwhile recovery took it, so after it the row is lost.
  const t = run(async (held) => answer(held, stalled ? 'lost' : 'renewed'), registry);
  await jest.advanceTimersByTimeAsync(2 * H);
  expect(a.controller.signal.aborted).toBe(false);
  stalled = true;
  jest.setSystemTime(Date.now() + 10 * H); // the process was stopped: no timer ran
  await jest.advanceTimersByTimeAsync(H);
  expect(['deadline', 'lost']).toContain(a.abortCause);
  expect(t.fatal).toEqual([]);
  await jest.advanceTimersByTimeAsync(5 * H);
  expect(t.fatal).toEqual([]);
});

/** A pino logger at debug whose lines land in `lines`. */
const capturing = () => {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { lines, log };
};

/** `n` attempts executing, job ids 1..n. */
const executing = (n: number) => {
  const registry = new Registry();
  const entries = registry.addClaimed(Array.from({ length: n }, (_, i) => row(String(i + 1))), Date.now() + clock.attemptDeadlineMs);
  for (const entry of entries) {
    entry.state = 'executing';
    entry.taken = true;
  }
  return { registry, entries, ids: entries.map((e) => e.row.id) };
};

test('an outage past the attempt deadline: ONE line names every attempt it aborts (count and job ids), not one per attempt', async () => {
  const { registry, entries, ids } = executing(64);
  const { lines, log } = capturing();
  run(async () => {
    throw transient();
  }, registry, { logger: log });
  await jest.advanceTimersByTimeAsync(clock.attemptDeadlineMs + H / 4);
  expect(entries.every((e) => e.abortCause === 'deadline')).toBe(true);
  const aborting = lines.filter((l) => l.msg === 'attempt deadlines passed: aborting the attempts');
  expect(aborting).toHaveLength(1);
  expect(aborting[0]).toMatchObject({ level: 40, attempts: 64, jobIds: ids });
  // No line of the heartbeat names one attempt.
  expect(lines.filter((l) => 'jobId' in l)).toEqual([]);
});

test('a beat that finds many leases lost: ONE line names them (count and job ids); more than 100 attempts: the first 100 ids', async () => {
  const { registry, entries, ids } = executing(150);
  const { lines, log } = capturing();
  run(async (held) => answer(held, 'lost'), registry, { logger: log });
  await jest.advanceTimersByTimeAsync(H); // the first beat
  expect(entries.every((e) => e.abortCause === 'lost')).toBe(true);
  const lost = lines.filter((l) => l.msg === 'leases lost: cancelling the attempts');
  expect(lost).toHaveLength(1);
  expect(lost[0]).toMatchObject({ level: 40, attempts: 150, jobIds: ids.slice(0, 100) });
  expect(lines.filter((l) => 'jobId' in l)).toEqual([]);
});

test('a stall that catches a beat in flight is not a heartbeat failure either', async () => {
  // Every answer takes 300 ms: the check at H/4 runs before it after the stall.
  const t = run((held) => new Promise((resolve) => setTimeout(() => resolve(answer(held, 'renewed')), 300)));
  await jest.advanceTimersByTimeAsync(2 * H + 10); // a beat has just started
  jest.setSystemTime(Date.now() + 10 * H);
  await jest.advanceTimersByTimeAsync(5 * H);
  expect(t.fatal).toEqual([]);
  expect(t.health).toEqual([]);
});

test('a non-transient error stops the worker at once; a missing schema says so', async () => {
  const t = run(async () => {
    throw Object.assign(new Error('function acta.heartbeat(...) does not exist'), { code: '42883' });
  });
  await jest.advanceTimersByTimeAsync(H); // the first beat
  expect(t.fatal).toHaveLength(1);
  expect(t.fatal[0]).toBeInstanceOf(SchemaNotMigratedError);
  expect(t.calls).toHaveLength(1);
  await jest.advanceTimersByTimeAsync(5 * H);
  expect(t.calls).toHaveLength(1);
});

test('a worker that holds nothing keeps trying through an outage of many leases, never faster than the back-off and never slower than 5 s', async () => {
  let failing = true;
  const tries: number[] = [];
  const t = run(async (held) => {
    tries.push(Date.now());
    if (failing) throw transient();
    return answer(held, 'renewed');
  });
  await jest.advanceTimersByTimeAsync(10 * clock.leaseMs);
  expect(t.fatal).toEqual([]);
  expect(t.health).toEqual([false]);
  const gaps = tries.slice(1).map((at, i) => at - tries[i]);
  expect(Math.max(...gaps)).toBeLessThanOrEqual(H * 1.25); // H = 1 s: the back-off's own cap
  failing = false;
  await jest.advanceTimersByTimeAsync(1.25 * H);
  expect(t.health).toEqual([false, true]);
});

test('at the default H (45 s) the retry back-off is capped at 4 s ± 25 %: a server back after 120 s is found within 5 s', async () => {
  const big = leaseClock(45_000);
  let failing = false;
  const tries: number[] = [];
  const t = run(async (held) => {
    tries.push(Date.now());
    if (failing) throw transient();
    return answer(held, 'renewed');
  }, new Registry(), { clock: big });
  failing = true;
  await jest.advanceTimersByTimeAsync(45_000 + 120_000); // the first beat at H fails, and every try for 120 s
  const backAt = Date.now();
  failing = false;
  await jest.advanceTimersByTimeAsync(5_000);
  expect(t.health).toEqual([false, true]);
  expect(tries[tries.length - 1] - backAt).toBeLessThanOrEqual(5_000);
  const gaps = tries.slice(1).map((at, i) => at - tries[i]);
  expect(Math.max(...gaps)).toBeLessThanOrEqual(5_000);
  expect(t.fatal).toEqual([]);
});

test('a sign that the database is back (reachable$) ends a retry\'s wait at once', async () => {
  const big = leaseClock(45_000);
  const reachable$ = new Subject<void>();
  let failing = false;
  const t = run(async (held) => {
    if (failing) throw transient();
    return answer(held, 'renewed');
  }, new Registry(), { clock: big, reachable$ });
  failing = true;
  await jest.advanceTimersByTimeAsync(45_000 + 30_000);
  failing = false;
  await jest.advanceTimersByTimeAsync(1); // no retry is due within 1 ms (the shortest delay is 750 ms)
  expect(t.health).toEqual([false]);
  reachable$.next();
  await jest.advanceTimersByTimeAsync(1);
  expect(t.health).toEqual([false, true]);
});

describe('an outage shorter than the time left to the deadline aborts no handler', () => {
  // Renewed at 0 (the start); deadline 2.5 H. The beat at H fails; the server is back at `backAt`.
  for (const heartbeatMs of [1_000, 2_000, 45_000]) {
    for (const backFraction of [1.5, 2, 2.3, 2.45]) {
      test(`H = ${heartbeatMs} ms, back at ${backFraction} H`, async () => {
        const c = leaseClock(heartbeatMs);
        const registry = new Registry();
        const [entry] = registry.addClaimed([row('1')], Date.now() + c.attemptDeadlineMs);
        entry.state = 'executing';
        entry.taken = true;
        const startedAt = Date.now();
        const backAt = startedAt + backFraction * heartbeatMs;
        let renewedAt: number | undefined;
        const t = run(async (held) => {
          if (Date.now() >= startedAt + heartbeatMs && Date.now() < backAt) throw transient();
          renewedAt ??= Date.now() >= backAt ? Date.now() : undefined;
          return answer(held, 'renewed');
        }, registry, { clock: c });
        await jest.advanceTimersByTimeAsync(3 * heartbeatMs);
        expect(entry.abortCause).toBeUndefined();
        expect(renewedAt).toBeDefined();
        expect(renewedAt!).toBeLessThan(startedAt + c.attemptDeadlineMs);
        expect(t.fatal).toEqual([]);
      });
    }
  }
});

test('beatRetryDelayMs: the back-off, bounded by the last try before the deadline, then every quarter margin until it', () => {
  const mid = () => 0.5; // no jitter
  const H1 = 1_000;
  // The back-off alone: 250, 500, 1000, 1000 ms (min(1 s, H/4) doubling to min(H, 4 s)).
  expect([1, 2, 3, 4].map((n) => beatRetryDelayMs(n, 0, undefined, H1, mid))).toEqual([250, 500, 1_000, 1_000]);
  // At 45 s: 1, 2, 4, 4 s.
  expect([1, 2, 3, 4].map((n) => beatRetryDelayMs(n, 0, undefined, 45_000, mid))).toEqual([1_000, 2_000, 4_000, 4_000]);
  expect(lastTryMarginMs(H1)).toBe(125);
  // Deadline at 2 500: a try at 1 750 waits 625 ms, to the last try at 2 375, not the 1 000 of the back-off.
  expect(beatRetryDelayMs(3, 1_750, 2_500, H1, mid)).toBe(625);
  // After the last try: every 32 ms (a quarter margin, rounded up) until the deadline.
  expect(beatRetryDelayMs(4, 2_380, 2_500, H1, mid)).toBe(32);
  // Past the deadline (its attempt is aborted): the back-off again.
  expect(beatRetryDelayMs(5, 2_501, 2_500, H1, mid)).toBe(1_000);
  // A back-off shorter than the time to the last try is kept.
  expect(beatRetryDelayMs(1, 0, 2_500, H1, mid)).toBe(250);
});
