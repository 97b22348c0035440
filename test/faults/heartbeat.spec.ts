/**
 * The heartbeat's lease clock in virtual time (jest fake timers drive asyncScheduler and Date;
 * the database call is a stub): renewals re-arm deadlines, locked rows keep theirs, lost rows are
 * cancelled, failing or hanging beats stop claims and, after a whole lease, the worker; a stall
 * alone does not.
 */
import pino from 'pino';
import { asyncScheduler, type Subscription } from 'rxjs';
import { leaseClock } from '../../src/config';
import type { ClaimedRow, HeartbeatResult, HeldPair } from '../../src/db/functions';
import { SchemaNotMigratedError } from '../../src/errors';
import { heartbeat, HeartbeatLostError } from '../../src/heartbeat';
import { Registry } from '../../src/registry';

const H = 1000;
const clock = leaseClock(H);
const logger = pino({ level: 'silent' });

const row = (id: string): ClaimedRow => ({ id, definition: 'd', payload: {}, execution: 1, attempts: 0, maxAttempts: 5, unchargedReturns: 0, priority: 0 });
const answer = (held: HeldPair[], state: 'renewed' | 'locked' | 'lost'): HeartbeatResult => ({
  renewed: state === 'renewed' ? held : [],
  locked: state === 'locked' ? held : [],
  lost: state === 'lost' ? held : [],
  recoveryDue: false,
});
const transient = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

let subscription: Subscription | undefined;
beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
afterEach(() => {
  subscription?.unsubscribe();
  jest.useRealTimers();
});

/** Runs the heartbeat on asyncScheduler, which the fake timers drive (and Date with them). */
const run = (beat: (held: HeldPair[]) => Promise<HeartbeatResult>, registry = new Registry()) => {
  const health: boolean[] = [];
  const fatal: unknown[] = [];
  const calls: HeldPair[][] = [];
  subscription = heartbeat({
    registry,
    clock,
    beat: (held) => {
      calls.push(held);
      return beat(held);
    },
    startRecovery: () => undefined,
    onHealth: (ok) => health.push(ok),
    onFatal: (err) => fatal.push(err),
    logger,
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
  // The registration was the first beat (workers_register.sql): the next comes H after it.
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

test('failing beats: claims stop at the first failure, resume on success; a whole lease of failures stops the worker', async () => {
  let failing = false;
  const t = run(async (held) => {
    if (failing) throw transient();
    return answer(held, 'renewed');
  });
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

test('a beat that hangs counts as failing: no claims after H, and the worker stops after a lease', async () => {
  let hang = false;
  const t = run((held) => (hang ? new Promise<HeartbeatResult>(() => undefined) : Promise.resolve(answer(held, 'renewed'))));
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
