// The Ledger's contract (src/ledger.ts): every decision the calls of a worker and a client make,
// as the SQL functions of sql/functions/ make them. Run against the SQL (sql.test.ts, a real
// server) and the in-memory ledger of acta/testing (memory.spec.ts, no I/O), so the two cannot
// drift apart.
//
// Time: each test moves the ledger's clock with `advance(ms)` only: on the SQL every stored time
// moves ms into the past (the database's clock cannot be moved), on memory the virtual scheduler
// moves on. Real time also passes between calls on the SQL and none does on memory, so no test
// asserts at an exact instant: durations are checked as ranges, and a test advances past a
// boundary by at least 1 ms.
import { randomUUID } from 'node:crypto';
import { type Definition, defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import type { EnqueueRows } from '../../src/db/jobs';
import type { ClaimedRow, CompletionAck, CompletionRow, HeldPair, JobRecord, PassSchedule } from '../../src/db/types';
import type { Ledger } from '../../src/ledger';
import { waitFor } from '../helpers/wait';
import { outboxCases } from './outbox';
import { retentionZeroCases } from './retentionZero';
import { scheduleCases } from './schedules';
import { workflowCases } from './workflows';

export interface LedgerUnderTest {
  ledger: Ledger;
  /** The ledger's clock, ms since the epoch: the database's now(), or the scheduler's. */
  now(): Promise<number>;
  /** Moves the ledger's clock `ms` on, relative to everything it stores. */
  advance(ms: number): Promise<void>;
}

const LEASE_MS = 60_000;
const DEAD_AFTER_MS = 600_000;
const handler = () => undefined;
let namespaces = 0;
const fresh = () => `contract-${++namespaces}-${randomUUID().slice(0, 8)}`;

interface Item {
  definition: string;
  payload?: unknown;
  priority?: number;
  runAt?: Date;
  maxAttempts?: number;
  idempotencyKey?: string;
  concurrencyKey?: string;
  rateKey?: string;
  lane?: string;
}

const rowsOf = (items: Item[]): EnqueueRows => ({
  definitions: items.map((i) => i.definition),
  payloads: items.map((i) => JSON.stringify(i.payload ?? {})),
  priorities: items.map((i) => i.priority ?? null),
  runAts: items.map((i) => i.runAt ?? null),
  maxAttempts: items.map((i) => i.maxAttempts ?? null),
  idempotencyKeys: items.map((i) => i.idempotencyKey ?? null),
  concurrencyKeys: items.map((i) => i.concurrencyKey ?? null),
  rateKeys: items.map((i) => i.rateKey ?? null),
  lanes: items.map((i) => i.lane ?? null),
});

const completion = (rows: { id: string; execution: number }[], outcome: CompletionRow['outcome'] = 'succeeded', retryDelayMs = 0, more: Partial<CompletionRow> = {}): CompletionRow[] =>
  rows.map((r) => ({
    id: r.id,
    execution: r.execution,
    outcome,
    result: null,
    error: outcome.startsWith('failed') ? JSON.stringify({ name: 'Error', message: 'x' }) : null,
    retryDelayMs,
    ...more,
  }));
const held = (rows: { id: string; execution: number }[], started = true): HeldPair[] => rows.map((r) => ({ id: r.id, execution: r.execution, started }));
const payloadsOf = (rows: ClaimedRow[]) => rows.map((r) => r.payload);
const iOf = (rows: ClaimedRow[]) => rows.map((r) => (r.payload as { i: number }).i);
const statusesOf = (acks: CompletionAck[]) => acks.map((a) => a.status);
const byId = <T extends { id: string }>(rows: T[]) => [...rows].sort((a, b) => Number(a.id) - Number(b.id));
/**
 * An instant a completion stamped on the job row (finished_at; run_at less the retry delay): the
 * call's start, at or before its ledger row's end, which is read once the call holds its rows
 * (docs/decisions/2026-12-05-ledger-times.md); never before the attempt's claim. 1 ms: rounding.
 */
const atAttemptEnd = (t: Date | number, attempt: { claimedAt: Date; finishedAt: Date }) =>
  Number(t) >= attempt.claimedAt.getTime() - 1 && Number(t) <= attempt.finishedAt.getTime() + 1;

/** Defines the contract's tests; `open` gives the ledger each test runs on. */
export function ledgerContract(open: () => LedgerUnderTest | Promise<LedgerUnderTest>): void {
  let h: LedgerUnderTest;
  let ledger: Ledger;
  beforeEach(async () => {
    h = await open();
    ledger = h.ledger;
  });

  /** A worker of `namespace` running `definitions`, with their policies declared; its id. */
  async function declare(namespace: string, definitions: (Definition | string)[], options: { build?: string; passes?: PassSchedule[]; workerId?: string } = {}): Promise<string> {
    const defs = definitions.map((d) => (typeof d === 'string' ? defineJob({ name: d, handler }) : d));
    const workerId = options.workerId ?? randomUUID();
    await ledger.registerWorker({
      workerId,
      namespace,
      hostname: 'contract',
      pid: 1,
      definitions: defs.map((d) => d.name),
      maxAttempts: defs.map((d) => d.maxAttempts ?? null),
      leaseMs: LEASE_MS,
      passes: options.passes,
      build: options.build ?? null,
      policies: Object.fromEntries(defs.map((d) => [d.name, declaredPolicy(d)])),
    });
    return workerId;
  }
  const enqueue = async (namespace: string, items: Item[]) => ledger.enqueueJobs(namespace, rowsOf(items));
  const ids = async (namespace: string, items: Item[]) => (await enqueue(namespace, items)).map((r) => r.id as string);
  const claim = (namespace: string, workerId: string, definitions: string[], limit: number, leaseMs = LEASE_MS) => ledger.claimJobs({ namespace, workerId, definitions, limit, leaseMs });
  const complete = (workerId: string, rows: CompletionRow[]) => ledger.completeExecutions(workerId, rows);
  const beat = (workerId: string, namespace: string, pairs: HeldPair[], leaseMs = LEASE_MS, passes?: PassSchedule[]) => ledger.heartbeat({ workerId, namespace, held: pairs, leaseMs, passes });
  const recover = (namespace: string, limit?: number) => ledger.recoverJobs({ namespace, deadAfterMs: DEAD_AFTER_MS, limit });
  const job = async (namespace: string, id: string): Promise<JobRecord> => {
    const record = await ledger.readJob(namespace, id);
    if (!record) throw new Error(`no job ${id} in ${namespace}`);
    return record;
  };
  /** The parked ones among `jobIds`, in id order: [payload.i, blockedBy]. */
  const parked = async (namespace: string, jobIds: string[]) =>
    (await Promise.all(jobIds.map((id) => job(namespace, id)))).filter((j) => j.blockedBy !== null).map((j) => [(j.payload as { i: number }).i, j.blockedBy]);
  /**
   * The namespaces `fn`'s calls woke, in order: a wakeup of a marker namespace sent after them
   * arrives after theirs (one LISTEN connection delivers in commit order).
   */
  async function woken(fn: () => Promise<unknown>): Promise<string[]> {
    const got: string[] = [];
    const unlisten = await ledger.listen('acta_jobs', { onNotify: (payload) => got.push(payload) });
    try {
      await fn();
      const marker = fresh();
      await enqueue(marker, [{ definition: 'marker' }]);
      await waitFor(() => got.includes(marker), `the marker namespace's wakeup (got ${JSON.stringify(got)})`);
      return got.slice(0, got.indexOf(marker));
    } finally {
      await unlisten();
    }
  }

  describe('claim order', () => {
    test('a claim takes due rows by priority (higher first), then due time, then id, straight to Executing under its worker', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['order']);
      const now = await h.now();
      const at = (ms: number) => new Date(now + ms);
      await enqueue(ns, [
        { definition: 'order', payload: { tag: 'p0-late' }, runAt: at(-1_000) },
        { definition: 'order', payload: { tag: 'p0-early' }, runAt: at(-3_000), maxAttempts: 4 },
        { definition: 'order', payload: { tag: 'p5-a' }, priority: 5 },
        { definition: 'order', payload: { tag: 'p-3' }, priority: -3, runAt: at(-60_000) },
        { definition: 'order', payload: { tag: 'p10' }, priority: 10 },
        { definition: 'order', payload: { tag: 'p5-b' }, priority: 5 },
        { definition: 'order', payload: { tag: 'p0-mid' }, runAt: at(-2_000) },
      ]);
      const tags: string[][] = [];
      for (;;) {
        const { rows } = await claim(ns, worker, ['order'], 2);
        if (rows.length === 0) break;
        tags.push(rows.map((r) => (r.payload as { tag: string }).tag));
        expect(rows.map(({ execution, attempts, unchargedReturns, definition }) => ({ execution, attempts, unchargedReturns, definition }))).toEqual(
          rows.map(() => ({ execution: 1, attempts: 0, unchargedReturns: 0, definition: 'order' })),
        );
      }
      expect(tags).toEqual([['p10', 'p5-a'], ['p5-b', 'p0-early'], ['p0-mid', 'p0-late'], ['p-3']]);
      // Claimed rows are Executing and not claimed again; the idle answer: nothing due (null).
      expect(await claim(ns, randomUUID(), ['order'], 10)).toEqual({ rows: [], nextDueInMs: null });
    });

    test('a claimed row carries its own maxAttempts (null: its definition decides) and its priority', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['fields']);
      const [a, b] = await ids(ns, [
        { definition: 'fields', payload: { n: 1 }, maxAttempts: 4, priority: 2 },
        { definition: 'fields', payload: { n: 2 } },
      ]);
      const { rows } = await claim(ns, worker, ['fields'], 10);
      expect(rows).toEqual([
        { id: a, definition: 'fields', payload: { n: 1 }, execution: 1, attempts: 0, maxAttempts: 4, unchargedReturns: 0, priority: 2 },
        { id: b, definition: 'fields', payload: { n: 2 }, execution: 1, attempts: 0, maxAttempts: null, unchargedReturns: 0, priority: 0 },
      ]);
      expect(await job(ns, a)).toMatchObject({ status: 'executing', execution: 1, attempts: 0 });
    });

    test('a claim of fewer rows than are due takes the first in claim order: a higher priority due later first; one that looked at a due row and left it wakes the namespace', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['order']);
      const early = await ids(ns, Array.from({ length: 20 }, (_, i) => ({ definition: 'order', payload: { i } })));
      await h.advance(10);
      const [urgent] = await ids(ns, [{ definition: 'order', payload: { urgent: true }, priority: 5 }]);
      let first: ClaimedRow[] = [];
      // The pick looked at the first 8 due rows in due order, then took the urgent one and 7 of them.
      expect(await woken(async () => (first = (await claim(ns, worker, ['order'], 8)).rows))).toEqual([ns]);
      expect(first.map((r) => r.id)).toEqual([urgent, ...early.slice(0, 7)]);
      expect((await claim(ns, worker, ['order'], 8)).rows.map((r) => r.id)).toEqual(early.slice(7, 15));
      let last: ClaimedRow[] = [];
      expect(await woken(async () => (last = (await claim(ns, worker, ['order'], 8)).rows))).toEqual([]);
      expect(last.map((r) => r.id)).toEqual(early.slice(15, 20));
      // Two definitions give up to twice the rows asked for: the ones left wake the namespace too.
      await enqueue(ns, ['order', 'order', 'other', 'other'].map((definition, i) => ({ definition, payload: { i } })));
      let two: ClaimedRow[] = [];
      expect(await woken(async () => (two = (await claim(ns, worker, ['order', 'other'], 2)).rows))).toEqual([ns]);
      expect(iOf(two)).toEqual([0, 1]);
    });

    test('rows due later wait: the idle answer is the time until the next one of the claim\'s definitions is due', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['later', 'other']);
      const now = await h.now();
      await enqueue(ns, [
        { definition: 'later', payload: { i: 0 }, runAt: new Date(now + 30_000) },
        { definition: 'other', payload: { i: 1 }, runAt: new Date(now + 10_000) },
      ]);
      await enqueue(fresh(), [{ definition: 'later', runAt: new Date(now + 5_000) }]); // another namespace's
      const idle = await claim(ns, worker, ['later'], 10);
      expect(idle.rows).toEqual([]);
      expect(idle.nextDueInMs).toBeGreaterThan(25_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(30_000);
      expect((await claim(ns, worker, ['later', 'other'], 10)).nextDueInMs).toBeLessThanOrEqual(10_000);
      await h.advance(10_001);
      expect(iOf((await claim(ns, worker, ['later', 'other'], 10)).rows)).toEqual([1]);
      await h.advance(20_000);
      expect(iOf((await claim(ns, worker, ['later'], 10)).rows)).toEqual([0]);
      expect(await claim(ns, worker, ['later'], 10)).toEqual({ rows: [], nextDueInMs: null });
    });

    test('a claim takes each row once, whatever its list of definitions, and only its namespace\'s; a limit below 1 is refused (22023)', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['twice']);
      const jobs = await ids(ns, Array.from({ length: 10 }, (_, i) => ({ definition: 'twice', payload: { i } })));
      await enqueue(fresh(), [{ definition: 'twice' }]);
      expect((await claim(ns, worker, ['twice', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(0, 4));
      expect((await claim(ns, worker, ['twice', 'other', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(4, 8));
      await expect(claim(ns, worker, ['twice'], 0)).rejects.toMatchObject({ code: '22023', message: expect.stringContaining('p_limit must be at least 1, got 0') });
      await expect(claim(ns, worker, ['twice'], -1)).rejects.toMatchObject({ code: '22023' });
      expect((await claim(ns, worker, ['twice', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(8, 10));
      expect((await Promise.all(jobs.map((id) => job(ns, id)))).map((j) => j.execution)).toEqual(jobs.map(() => 1));
    });
  });

  describe('fencing: every write of an attempt carries (job, execution, holder)', () => {
    test('a completion, a heartbeat or a step with a wrong execution or another worker is stale and changes nothing', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['fenced']);
      const other = await declare(ns, ['fenced']);
      const [id] = await ids(ns, [{ definition: 'fenced' }]);
      const [row] = (await claim(ns, worker, ['fenced'], 1)).rows;
      const before = await job(ns, id);
      const wrong = { id, execution: row.execution + 1 };
      expect(statusesOf(await complete(worker, completion([wrong])))).toEqual(['stale']);
      expect(statusesOf(await complete(other, completion([row])))).toEqual(['stale']);
      expect(await beat(worker, ns, held([wrong]))).toMatchObject({ renewed: [], locked: [], lost: held([wrong]) });
      expect(await beat(other, ns, held([row]))).toMatchObject({ renewed: [], locked: [], lost: held([row]) });
      const step = (workerId: string, execution: number) => ledger.recordStep({ workerId, jobId: id, execution, name: 's', resultJson: '1' });
      expect(await step(worker, wrong.execution)).toEqual({ status: 'stale', result: null });
      expect(await step(other, row.execution)).toEqual({ status: 'stale', result: null });
      expect(await job(ns, id)).toEqual(before);
      expect(await ledger.loadSteps(id)).toEqual(new Map());
      // The right one lands, once.
      expect(await complete(worker, completion([row]))).toEqual([{ id, execution: 1, status: 'succeeded' }]);
      expect(statusesOf(await complete(worker, completion([row])))).toEqual(['stale']);
      expect((await job(ns, id)).executions).toEqual([{ execution: 1, workerId: worker, claimedAt: expect.any(Date), finishedAt: expect.any(Date), outcome: 'succeeded', charged: true, error: null }]);
    });

    test('an attempt recovery took back is fenced out: its completion, heartbeat and step; the next claim is execution 2 under another worker', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['fenced']);
      const [id] = await ids(ns, [{ definition: 'fenced' }]);
      const [row] = (await claim(ns, worker, ['fenced'], 1, 1_000)).rows;
      expect((await beat(worker, ns, held([row]), 1_000)).renewed).toHaveLength(1);
      await h.advance(1_001);
      expect(await recover(ns)).toEqual([{ id, execution: 1, status: 'ready', charged: true }]);
      const afterRecovery = await job(ns, id);
      expect(afterRecovery).toMatchObject({ status: 'ready', attempts: 1, execution: 1, error: { name: 'WorkerLost', workerId: worker } });
      expect(afterRecovery.executions).toMatchObject([{ execution: 1, outcome: 'lost', charged: true, workerId: worker, error: { name: 'WorkerLost' } }]);
      expect(statusesOf(await complete(worker, [...completion([row]), ...completion([row], 'handed_back')]))).toEqual(['stale', 'stale']);
      expect((await beat(worker, ns, held([row]))).lost).toEqual(held([row]));
      expect(await ledger.recordStep({ workerId: worker, jobId: id, execution: 1, name: 's', resultJson: '1' })).toEqual({ status: 'stale', result: null });
      expect(await job(ns, id)).toEqual(afterRecovery);
      const other = randomUUID();
      const { rows } = await claim(ns, other, ['fenced'], 1);
      expect(rows).toMatchObject([{ id, execution: 2, attempts: 1 }]);
      expect(statusesOf(await complete(worker, completion([{ id, execution: 1 }])))).toEqual(['stale']);
      expect(statusesOf(await complete(other, completion(rows)))).toEqual(['succeeded']);
      expect((await job(ns, id)).executions.map((e) => [e.execution, e.outcome, e.workerId])).toEqual([
        [1, 'lost', worker],
        [2, 'succeeded', other],
      ]);
    });
  });

  describe('completion: the decision table', () => {
    const RESULT = { r: 1 };
    const OLD_ERROR = { name: 'Error', message: 'the previous attempt' };
    const NEW_ERROR = { name: 'Error', message: 'this attempt' };
    const DELAY_MS = 60_000;
    const outcomes = ['succeeded', 'failed', 'failed_final', 'handed_back', 'expired', 'rate_limited'] as const;
    /** Before the completion: attempts charged and the job's own limit. */
    const states = { 'attempts left': { attempts: 1, max: 3 }, 'last attempt': { attempts: 2, max: 3 }, 'no limit of its own': { attempts: 1, max: undefined } } as const;
    type State = keyof typeof states;

    function expected(outcome: (typeof outcomes)[number], state: State) {
      const { attempts } = states[state];
      const charged = { attempts: attempts + 1, error: NEW_ERROR, unchargedReturns: 0 };
      const uncharged = { attempts, error: OLD_ERROR, unchargedReturns: 0 };
      switch (outcome) {
        case 'succeeded':
          return { ack: 'succeeded', status: 'succeeded', attempts: attempts + 1, error: null, unchargedReturns: 0, result: RESULT, due: 'kept', finished: true, ledger: { outcome: 'succeeded', charged: true, error: null } };
        case 'failed':
          return state === 'last attempt'
            ? { ack: 'failed', status: 'failed', ...charged, result: null, due: 'kept', finished: true, ledger: { outcome: 'failed_final', charged: true, error: NEW_ERROR } }
            : { ack: 'ready', status: 'ready', ...charged, result: null, due: 'retry', finished: false, ledger: { outcome: 'failed', charged: true, error: NEW_ERROR } };
        case 'failed_final':
          return { ack: 'failed', status: 'failed', ...charged, result: null, due: 'kept', finished: true, ledger: { outcome: 'failed_final', charged: true, error: NEW_ERROR } };
        case 'handed_back':
          return { ack: 'ready', status: 'ready', ...uncharged, result: null, due: 'now', finished: false, ledger: { outcome: 'handed_back', charged: false, error: null } };
        case 'expired':
          return { ack: 'ready', status: 'ready', ...uncharged, unchargedReturns: 1, result: null, due: 'now', finished: false, ledger: { outcome: 'expired', charged: false, error: null } };
        case 'rate_limited':
          return { ack: 'ready', status: 'ready', ...uncharged, result: null, due: 'retry', finished: false, ledger: { outcome: 'rate_limited', charged: false, error: null } };
      }
    }

    test('every shape on every attempt state, in one batch: its answer, the row, its ledger row', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['shapes']);
      const cases = outcomes.flatMap((outcome) => (Object.keys(states) as State[]).map((state) => ({ outcome, state })));
      const jobIds = await ids(ns, cases.map(({ state }) => ({ definition: 'shapes', maxAttempts: states[state].max })));
      const all = () => claim(ns, worker, ['shapes'], 100);
      const fail = (rows: ClaimedRow[]) => completion(rows, 'failed', 0, { error: JSON.stringify(OLD_ERROR) });
      // Attempts charged before: 1 for all, 2 for 'last attempt' (the others handed back meanwhile).
      await complete(worker, fail((await all()).rows));
      const second = (await all()).rows;
      const isLast = (r: ClaimedRow) => cases[jobIds.indexOf(r.id)].state === 'last attempt';
      await complete(worker, [...fail(second.filter(isLast)), ...completion(second.filter((r) => !isLast(r)), 'handed_back')]);
      await h.advance(10); // so that a row due now is not due when it was
      const before = await Promise.all(jobIds.map((id) => job(ns, id)));
      expect(before.map((j) => [j.attempts, j.error])).toEqual(cases.map(({ state }) => [states[state].attempts, OLD_ERROR]));
      const third = byId((await all()).rows);
      expect(third.map((r) => r.id)).toEqual(jobIds);
      const acks = await complete(
        worker,
        third.map((r, i) => ({
          id: r.id,
          execution: r.execution,
          outcome: cases[i].outcome,
          result: cases[i].outcome === 'succeeded' ? JSON.stringify(RESULT) : null,
          error: cases[i].outcome.startsWith('failed') ? JSON.stringify(NEW_ERROR) : null,
          retryDelayMs: DELAY_MS,
        })),
      );
      const after = await Promise.all(jobIds.map((id) => job(ns, id)));
      // Uncharged returns show in the next claim: the rows due now.
      const returns = new Map((await all()).rows.map((r) => [r.id, r.unchargedReturns]));
      const seen = cases.map((c, i) => {
        const j = after[i];
        const last = j.executions[j.executions.length - 1];
        const due = j.runAt.getTime() === before[i].runAt.getTime() ? 'kept' : atAttemptEnd(j.runAt, last) ? 'now' : atAttemptEnd(j.runAt.getTime() - DELAY_MS, last) ? 'retry' : 'other';
        return {
          ...c,
          ack: acks[i].status,
          status: j.status,
          attempts: j.attempts,
          error: j.error,
          unchargedReturns: returns.get(j.id) ?? 0,
          result: j.result,
          due,
          finished: j.finishedAt !== null && atAttemptEnd(j.finishedAt, last),
          ledger: { outcome: last.outcome, charged: last.charged, error: last.error },
        };
      });
      expect(seen).toEqual(cases.map((c) => ({ ...c, ...expected(c.outcome, c.state) })));
    });

    test('an element whose outcome names no shape is stale and changes nothing; the rest of its batch lands', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['shapes']);
      const [a, b] = await ids(ns, [{ definition: 'shapes' }, { definition: 'shapes' }]);
      const rows = byId((await claim(ns, worker, ['shapes'], 2)).rows);
      const before = await job(ns, a);
      const acks = await complete(worker, [...completion(rows.slice(0, 1), 'no-such-shape' as CompletionRow['outcome']), ...completion(rows.slice(1))]);
      expect(statusesOf(acks)).toEqual(['stale', 'succeeded']);
      expect(await job(ns, a)).toEqual(before);
      expect((await job(ns, b)).status).toBe('succeeded');
    });

    test('a retry is due after its delay; the idle answer says when; a delay is taken as 0..2^31-1 ms, a non-finite one as 0', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['retry']);
      const jobIds = await ids(ns, [0, 1, 2, 3, 4].map((i) => ({ definition: 'retry', payload: { i } })));
      const rows = byId((await claim(ns, worker, ['retry'], 10)).rows);
      const delays = [60_000, -5, Number.POSITIVE_INFINITY, Number.NaN, 1e12];
      const acks = await complete(worker, rows.flatMap((r, i) => completion([r], 'failed', delays[i])));
      expect(statusesOf(acks)).toEqual(['ready', 'ready', 'ready', 'ready', 'ready']);
      const dueAfter = async (id: string, delayMs: number) => {
        const j = await job(ns, id);
        return atAttemptEnd(j.runAt.getTime() - delayMs, j.executions[0]);
      };
      expect(await dueAfter(jobIds[0], 60_000)).toBe(true);
      expect(await dueAfter(jobIds[4], 2 ** 31 - 1)).toBe(true);
      // Due now: the three whose delay was taken as 0.
      expect(iOf((await claim(ns, worker, ['retry'], 10)).rows).sort((a, b) => a - b)).toEqual([1, 2, 3]);
      const idle = await claim(ns, worker, ['retry'], 10);
      expect(idle.rows).toEqual([]);
      expect(idle.nextDueInMs).toBeGreaterThan(55_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(60_000);
      await h.advance(60_001);
      expect(iOf((await claim(ns, worker, ['retry'], 10)).rows)).toEqual([0]);
    });

    test("the job's own maxAttempts ends it at its last failed attempt; without one a failed attempt is retried (the worker, which knows its definition's, sends failed_final)", async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'limited', handler, maxAttempts: 1 })]);
      const [own, none] = await ids(ns, [{ definition: 'limited', maxAttempts: 2 }, { definition: 'limited' }]);
      const run = async () => statusesOf(await complete(worker, completion(byId((await claim(ns, worker, ['limited'], 10)).rows), 'failed')));
      expect(await run()).toEqual(['ready', 'ready']);
      expect(await run()).toEqual(['failed', 'ready']);
      expect(await job(ns, own)).toMatchObject({ status: 'failed', attempts: 2, finishedAt: expect.any(Date) });
      expect(await job(ns, none)).toMatchObject({ status: 'ready', attempts: 2, finishedAt: null });
    });
  });

  describe('recovery', () => {
    test("an expired attempt goes back to Ready: charged with WorkerLost if it had started (a heartbeat said so, or it recorded a step), else uncharged; a lease not expired is left alone", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['lost']);
      const [a, b, c, d] = await ids(ns, [0, 1, 2, 3].map((i) => ({ definition: 'lost', payload: { i } })));
      const rows = byId((await claim(ns, worker, ['lost'], 3, 1_000)).rows);
      await claim(ns, worker, ['lost'], 1, LEASE_MS);
      expect((await beat(worker, ns, [...held(rows.slice(0, 1), false), ...held(rows.slice(1, 2), true)], 1_000)).renewed).toHaveLength(2);
      expect((await ledger.recordStep({ workerId: worker, jobId: c, execution: 1, name: 's', resultJson: '{}' })).status).toBe('recorded');
      await h.advance(1_001);
      expect(byId(await recover(ns))).toEqual([
        { id: a, execution: 1, status: 'ready', charged: false },
        { id: b, execution: 1, status: 'ready', charged: true },
        { id: c, execution: 1, status: 'ready', charged: true },
      ]);
      expect(await job(ns, a)).toMatchObject({ status: 'ready', attempts: 0, error: null, finishedAt: null, executions: [{ execution: 1, outcome: 'lost_uncharged', charged: false, workerId: worker, error: null }] });
      const lost = { name: 'WorkerLost', message: 'worker lost: the lease expired without a completion', workerId: worker };
      expect(await job(ns, b)).toMatchObject({ status: 'ready', attempts: 1, error: lost, executions: [{ outcome: 'lost', charged: true, workerId: worker, error: lost }] });
      expect((await job(ns, c)).attempts).toBe(1);
      expect((await job(ns, d)).status).toBe('executing');
      // Due at once; a's return counted.
      expect(byId((await claim(ns, worker, ['lost'], 10)).rows).map((r) => [r.id, r.unchargedReturns, r.execution])).toEqual([
        [a, 1, 2],
        [b, 0, 2],
        [c, 0, 2],
      ]);
    });

    test('a job goes back uncharged at most 3 times: from then on every return is charged', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['poison']);
      const [id] = await ids(ns, [{ definition: 'poison', maxAttempts: 10 }]);
      const charges: boolean[] = [];
      for (let i = 0; i < 5; i++) {
        const [row] = (await claim(ns, worker, ['poison'], 1, 1_000)).rows;
        expect(row.unchargedReturns).toBe(Math.min(i, 3));
        await h.advance(1_001);
        charges.push(...(await recover(ns)).map((r) => r.charged));
      }
      expect(charges).toEqual([false, false, false, true, true]);
      expect(await job(ns, id)).toMatchObject({ status: 'ready', attempts: 2 });
    });

    test("a charged return that uses up the job's attempts ends it Failed with WorkerLost: its own maxAttempts, else its definition's, else 25", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['own', defineJob({ name: 'declared', handler, maxAttempts: 2 }), 'default']);
      const [own, declared, dflt] = await ids(ns, [{ definition: 'own', maxAttempts: 1 }, { definition: 'declared' }, { definition: 'default' }]);
      const failedAt = new Map<string, number>();
      for (let n = 1; n <= 25; n++) {
        const { rows } = await claim(ns, worker, ['own', 'declared', 'default'], 10, 1_000);
        await beat(worker, ns, held(rows), 1_000);
        await h.advance(1_001);
        for (const r of await recover(ns)) if (r.status === 'failed') failedAt.set(r.id, n);
      }
      expect([own, declared, dflt].map((id) => failedAt.get(id))).toEqual([1, 2, 25]);
      expect(await job(ns, dflt)).toMatchObject({ status: 'failed', attempts: 25, error: { name: 'WorkerLost', workerId: worker }, finishedAt: expect.any(Date) });
    });

    test('a pass returns at most `limit` rows, the earliest expired leases first', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['many']);
      const [a, b, c] = await ids(ns, [0, 1, 2].map((i) => ({ definition: 'many', payload: { i } })));
      for (const leaseMs of [3_000, 1_000, 2_000]) await claim(ns, worker, ['many'], 1, leaseMs);
      await h.advance(3_001);
      expect(byId(await recover(ns, 2)).map((r) => r.id)).toEqual([b, c]);
      expect((await recover(ns, 2)).map((r) => r.id)).toEqual([a]);
      expect(await recover(ns, 2)).toEqual([]);
    });
  });

  describe('heartbeat', () => {
    test('renews every held pair to now + its lease (one that ran out but was not recovered yet too), and says lost for a pair that moved on', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['beat']);
      await enqueue(ns, [{ definition: 'beat' }, { definition: 'beat' }]);
      const rows = byId((await claim(ns, worker, ['beat'], 2, 1_000)).rows);
      await h.advance(1_500);
      expect(await beat(worker, ns, held(rows, false), 30_000)).toMatchObject({ renewed: held(rows, false), locked: [], lost: [] });
      await h.advance(20_000);
      expect(await recover(ns)).toEqual([]);
      await h.advance(10_001);
      expect(byId(await recover(ns)).map((r) => [r.id, r.charged])).toEqual(rows.map((r) => [r.id, false]));
      expect(await beat(worker, ns, held(rows))).toMatchObject({ renewed: [], locked: [], lost: held(rows) });
    });
  });

  describe('passes', () => {
    const passes = [
      { name: 'recovery', intervalMs: 60_000 },
      { name: 'retention', intervalMs: 3_600_000 },
    ];

    test("a registration is the worker's first beat: it takes the namespace's due passes; repeated (its answer lost), it answers every pass and takes none", async () => {
      const ns = fresh();
      const workerId = randomUUID();
      const register = () => ledger.registerWorker({ workerId, namespace: ns, hostname: 'h', pid: 1, definitions: ['d'], leaseMs: 60_000, passes });
      expect((await register()).duePasses.sort()).toEqual(['recovery', 'retention']);
      expect((await register()).duePasses.sort()).toEqual(['recovery', 'retention']);
      expect((await ledger.registerWorker({ workerId: randomUUID(), namespace: ns, hostname: 'h', pid: 2, definitions: ['d'], leaseMs: 60_000, passes })).duePasses).toEqual([]);
      expect((await beat(workerId, ns, [], 60_000, passes)).duePasses).toEqual([]);
    });

    test('a due pass is taken by one beat of many, then not again for its interval', async () => {
      const ns = fresh();
      await declare(ns, ['d'], { passes });
      const beats = () => Promise.all(Array.from({ length: 6 }, () => beat(randomUUID(), ns, [], 60_000, passes)));
      expect((await beats()).flatMap((b) => b.duePasses)).toEqual([]);
      await h.advance(60_001);
      expect((await beats()).flatMap((b) => b.duePasses)).toEqual(['recovery']);
      expect((await beat(randomUUID(), ns, [], 60_000, passes)).duePasses).toEqual([]);
      await h.advance(3_600_000);
      expect((await beats()).flatMap((b) => b.duePasses).sort()).toEqual(['recovery', 'retention']);
    });

    test('a shorter interval pulls the next due time in, without taking the pass before it is due; a longer one never pushes it out', async () => {
      const ns = fresh();
      await declare(ns, ['d'], { passes: [] });
      const take = async (intervalMs: number) => (await beat(randomUUID(), ns, [], 60_000, [{ name: 'compaction', intervalMs }])).duePasses;
      expect(await take(600_000)).toEqual(['compaction']); // created due, and taken
      expect(await take(60_000)).toEqual([]);
      await h.advance(50_000);
      expect(await take(600_000)).toEqual([]);
      await h.advance(10_001);
      expect(await take(600_000)).toEqual(['compaction']);
    });

    test("a namespace comes with its first worker: before it, no policies (version 0), and a heartbeat's passes cannot be kept (23503)", async () => {
      const ns = fresh();
      expect(await ledger.loadPolicies(ns, ['d'])).toEqual({ version: 0, policies: [] });
      await expect(beat(randomUUID(), ns, [])).rejects.toMatchObject({ code: '23503' });
      expect((await beat(randomUUID(), ns, [], 60_000, [])).policyVersion).toBeUndefined();
      await declare(ns, ['d']);
      expect((await ledger.loadPolicies(ns, ['d'])).policies.map((p) => p.name)).toEqual(['d']);
    });

    test('released passes are due again at once; a heartbeat reports the namespace\'s policy version', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['d'], { passes });
      expect((await beat(worker, ns, [], 60_000, passes)).duePasses).toEqual([]);
      await ledger.releasePasses(ns, ['recovery']);
      const b = await beat(worker, ns, [], 60_000, passes);
      expect(b.duePasses).toEqual(['recovery']);
      expect(b.policyVersion).toBe((await ledger.loadPolicies(ns, ['d'])).version);
      expect(b.policyVersion).toBeGreaterThan(0);
    });
  });

  describe('steps', () => {
    test('a step is recorded once: a later attempt gets the first result ("exists"); a write of an attempt that lost the job is stale', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['steps']);
      const [id] = await ids(ns, [{ definition: 'steps' }]);
      const step = (execution: number, name: string, result: unknown, workerId = worker) => ledger.recordStep({ workerId, jobId: id, execution, name, resultJson: JSON.stringify(result) });
      const [first] = (await claim(ns, worker, ['steps'], 1)).rows;
      expect(await step(1, 'a', { v: 1 })).toEqual({ status: 'recorded', result: { v: 1 } });
      expect(await step(1, 'a', { v: 9 })).toEqual({ status: 'exists', result: { v: 1 } });
      await complete(worker, completion([first], 'failed'));
      expect(await step(1, 'b', { v: 2 })).toEqual({ status: 'stale', result: null });
      await claim(ns, worker, ['steps'], 1);
      expect(await step(2, 'a', { v: 3 })).toEqual({ status: 'exists', result: { v: 1 } });
      expect(await step(2, 'b', [null, 'x'])).toEqual({ status: 'recorded', result: [null, 'x'] });
      expect(await step(2, 'c', 1, randomUUID())).toEqual({ status: 'stale', result: null });
      expect(await ledger.loadSteps(id)).toEqual(
        new Map<string, unknown>([
          ['a', { v: 1 }],
          ['b', [null, 'x']],
        ]),
      );
    });
  });

  describe('enqueue', () => {
    /** The refusal of enqueue_jobs' Rule (AC001), as the ledger raised it: its element, name and missing keys; undefined when it wrote. */
    const refusedBy = async (ns: string, items: (Item & { check?: boolean })[]) => {
      try {
        await ledger.enqueueJobs(ns, { ...rowsOf(items), checks: items.map((i) => i.check ?? true) });
        return undefined;
      } catch (err) {
        const e = err as { code?: string; detail?: string };
        expect(e.code).toBe('AC001');
        return JSON.parse(e.detail as string) as { item: number; name: string; missing: string[] };
      }
    };

    test('checked elements (enqueue_jobs, Rule): a name no worker declared in the namespace, a declared policy without its key, or a key without its policy, refuses the call and writes nothing; unchecked elements are not looked at', async () => {
      const ns = fresh();
      const before = await enqueue(ns, [{ definition: 'probe' }]);
      expect(await refusedBy(ns, [{ definition: 'never-declared' }])).toEqual({ item: 0, name: 'never-declared', missing: [] });
      await declare(ns, [
        'plain',
        defineJob({ name: 'keyed', handler, concurrency: { key: () => 'k', limit: 1 }, rate: { key: () => 'r', limit: 1, perMs: 1_000 } }),
        defineJob({ name: 'laned', handler, lane: () => 'l' }),
      ]);
      // Elsewhere declared is not declared here.
      expect(await refusedBy(fresh(), [{ definition: 'plain' }])).toEqual({ item: 0, name: 'plain', missing: [] });
      expect(await refusedBy(ns, [{ definition: 'plain' }, { definition: 'keyed', rateKey: 'r' }])).toEqual({ item: 1, name: 'keyed', missing: ['concurrency'] });
      expect(await refusedBy(ns, [{ definition: 'keyed' }])).toEqual({ item: 0, name: 'keyed', missing: ['concurrency', 'rate'] });
      expect(await refusedBy(ns, [{ definition: 'laned', lane: 'l', concurrencyKey: 'x' }])).toEqual({ item: 0, name: 'laned', missing: [], unused: ['concurrency'] });
      expect(await refusedBy(ns, [{ definition: 'laned', concurrencyKey: 'x' }])).toEqual({ item: 0, name: 'laned', missing: ['lane'], unused: ['concurrency'] });
      // A key for a policy the definition does not declare: it would limit nothing of its own.
      expect(await refusedBy(ns, [{ definition: 'plain', concurrencyKey: 'x', rateKey: 'y' }])).toEqual({ item: 0, name: 'plain', missing: [], unused: ['concurrency', 'rate'] });
      expect(await refusedBy(ns, [{ definition: 'plain' }, { definition: 'typo', check: false }, { definition: 'nope' }])).toEqual({ item: 2, name: 'nope', missing: [] });
      // Nothing of a refused call was written: the next id follows the first job's.
      const [next] = await enqueue(ns, [{ definition: 'probe' }]);
      const gap = Array.from({ length: Number(next.id) - Number(before[0].id) - 1 }, (_, k) => String(Number(before[0].id) + 1 + k));
      expect(await Promise.all(gap.map((id) => ledger.readJob(ns, id)))).toEqual(gap.map(() => null));
      expect(await refusedBy(ns, [{ definition: 'plain' }, { definition: 'keyed', concurrencyKey: 'k', rateKey: 'r' }, { definition: 'laned', lane: 'l' }, { definition: 'typo', check: false }])).toBeUndefined();
    });

    test('a job reads back as enqueued: its options, its keys, the defaults (priority 0, due now, its own maxAttempts null)', async () => {
      const ns = fresh();
      const runAt = new Date((await h.now()) + 3_600_000);
      const [id, plain] = await ids(ns, [
        { definition: 'mail', payload: { to: 'a@example.com' }, priority: 7, maxAttempts: 4, idempotencyKey: 'k1', runAt, concurrencyKey: 'c', rateKey: 'r', lane: 'l' },
        { definition: 'mail', payload: [1, 'two', { three: 3 }] },
      ]);
      expect(await job(ns, id)).toEqual({
        id,
        definition: 'mail',
        status: 'ready',
        payload: { to: 'a@example.com' },
        result: null,
        error: null,
        attempts: 0,
        maxAttempts: 4,
        effectiveMaxAttempts: 4,
        maxAttemptsFrom: 'job',
        execution: 0,
        priority: 7,
        runAt,
        createdAt: expect.any(Date),
        finishedAt: null,
        idempotencyKey: 'k1',
        concurrencyKey: 'c',
        rateKey: 'r',
        lane: 'l',
        blockedBy: null,
        progress: null,
        cancelRequestedAt: null,
        schedule: null,
        scheduledAt: null,
        executions: [],
        executionCount: 0,
      });
      const p = await job(ns, plain);
      expect(p).toMatchObject({ payload: [1, 'two', { three: 3 }], priority: 0, maxAttempts: null, effectiveMaxAttempts: 25, maxAttemptsFrom: 'default', idempotencyKey: null, concurrencyKey: null, lane: null });
      // Without a limit of its own, the definition's as declared (acta.definitions) applies, and is read so.
      await declare(ns, [defineJob({ name: 'mail', maxAttempts: 3, handler })]);
      expect(await job(ns, plain)).toMatchObject({ maxAttempts: null, effectiveMaxAttempts: 3, maxAttemptsFrom: 'definition' });
      expect(await job(ns, id)).toMatchObject({ maxAttempts: 4, effectiveMaxAttempts: 4, maxAttemptsFrom: 'job' });
      expect(p.runAt).toEqual(p.createdAt);
      expect(await ledger.readJob(fresh(), id)).toBeNull();
      expect(await ledger.readJob(ns, '999999999')).toBeNull();
      // A limit below 1 fails the whole batch (the column's check), writing nothing.
      await expect(enqueue(ns, [{ definition: 'mail', payload: { n: 1 } }, { definition: 'mail', maxAttempts: 0 }])).rejects.toMatchObject({ code: '23514' });
      expect(await ledger.readJob(ns, String(Number(plain) + 1))).toBeNull();
    });

    test("a payload's keys come back in jsonb's order (shorter first, then by their bytes), whatever order they were given in", async () => {
      const ns = fresh();
      const [id] = await ids(ns, [{ definition: 'mail', payload: { zeta: 1, alpha: [{ yy: 1, x: 2 }], b: { ä: 1, z: 2, aa: 3 } } }]);
      expect(JSON.stringify((await job(ns, id)).payload)).toBe('{"b":{"z":2,"aa":3,"ä":1},"zeta":1,"alpha":[{"x":2,"yy":1}]}');
    });

    test('an idempotency key names one job per namespace: again, it answers that id, created false, and writes nothing; in one batch the first element wins; a cancelled job keeps its key', async () => {
      const ns = fresh();
      const [first] = await enqueue(ns, [{ definition: 'mail', payload: { to: 'a' }, idempotencyKey: 'k1' }]);
      expect(first.created).toBe(true);
      expect(await enqueue(ns, [{ definition: 'mail', payload: { to: 'b' }, idempotencyKey: 'k1' }])).toEqual([{ id: first.id, created: false }]);
      expect((await job(ns, first.id as string)).payload).toEqual({ to: 'a' });
      const batch = await enqueue(ns, [
        { definition: 'mail', payload: { n: 1 }, idempotencyKey: 'k2' },
        { definition: 'mail', payload: { n: 2 }, idempotencyKey: 'k2' },
        { definition: 'mail', payload: { n: 3 } },
        { definition: 'mail', payload: { n: 4 }, idempotencyKey: 'k1' },
      ]);
      expect(batch.map((r) => r.created)).toEqual([true, false, true, false]);
      expect(batch[1].id).toBe(batch[0].id);
      expect(batch[3].id).toBe(first.id);
      expect((await job(ns, batch[0].id as string)).payload).toEqual({ n: 1 });
      const elsewhere = await enqueue(fresh(), [{ definition: 'mail', idempotencyKey: 'k1' }]);
      expect(elsewhere[0].created).toBe(true);
      expect(elsewhere[0].id).not.toBe(first.id);
      expect(await ledger.cancelJob(ns, first.id as string)).toBe('cancelled');
      expect(await enqueue(ns, [{ definition: 'mail', idempotencyKey: 'k1' }])).toEqual([{ id: first.id, created: false }]);
    });

    test('an enqueue wakes the namespace for a job due within a second, not for one due later', async () => {
      const ns = fresh();
      const now = await h.now();
      expect(await woken(() => enqueue(ns, [{ definition: 'w' }]))).toEqual([ns]);
      expect(await woken(() => enqueue(ns, [{ definition: 'w', runAt: new Date(now + 500) }]))).toEqual([ns]);
      expect(await woken(() => enqueue(ns, [{ definition: 'w', runAt: new Date(now + 5_000) }]))).toEqual([]);
      expect(await woken(() => enqueue(ns, [{ definition: 'w', runAt: new Date(now + 5_000) }, { definition: 'w' }]))).toEqual([ns]);
    });
  });

  describe('cancel', () => {
    test('a Ready job is cancelled once (queued, due later, waiting out a retry), never claimed; an Executing one is asked to cancel; a finished one, or another namespace\'s, is not', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['c']);
      const now = await h.now();
      const [running, done, retrying] = await ids(ns, [0, 1, 2].map((i) => ({ definition: 'c', payload: { i } })));
      const rows = byId((await claim(ns, worker, ['c'], 3)).rows);
      await complete(worker, [...completion(rows.slice(1, 2)), ...completion(rows.slice(2, 3), 'failed', 60_000)]);
      const [queued, later] = await ids(ns, [
        { definition: 'c', payload: { i: 3 } },
        { definition: 'c', payload: { i: 4 }, runAt: new Date(now + 3_600_000) },
      ]);
      expect(await ledger.cancelJob(fresh(), queued)).toBe(null);
      for (const id of [queued, later, retrying]) expect(await ledger.cancelJob(ns, id)).toBe('cancelled');
      expect(await ledger.cancelJob(ns, queued)).toBe(null);
      expect(await ledger.cancelJob(ns, running)).toBe('requested');
      expect(await ledger.cancelJob(ns, done)).toBe(null);
      expect(await ledger.cancelJob(ns, '999999999')).toBe(null);
      expect(await job(ns, queued)).toMatchObject({ status: 'cancelled', execution: 0, attempts: 0, finishedAt: expect.any(Date), executions: [] });
      expect(await job(ns, retrying)).toMatchObject({ status: 'cancelled', attempts: 1, error: { message: 'x' }, executions: [{ outcome: 'failed' }] });
      expect(await job(ns, running)).toMatchObject({ status: 'executing', cancelRequestedAt: expect.any(Date) });
      await h.advance(3_600_001);
      expect(await claim(ns, worker, ['c'], 10)).toEqual({ rows: [], nextDueInMs: null });
    });

    test('a parked job is cancelled: it reads Cancelled and no longer parked, and the rows behind it keep their place', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'k', handler, concurrency: { limit: 1 } })]);
      const jobIds = await ids(ns, [0, 1, 2].map((i) => ({ definition: 'k', payload: { i }, concurrencyKey: 'key' })));
      const running = await claim(ns, worker, ['k'], 10);
      expect(await ledger.cancelJob(ns, jobIds[1])).toBe('cancelled');
      expect(await job(ns, jobIds[1])).toMatchObject({ status: 'cancelled', blockedBy: null, concurrencyKey: 'key' });
      await complete(worker, completion(running.rows));
      expect(iOf((await claim(ns, worker, ['k'], 10)).rows)).toEqual([2]);
    });
  });

  describe('job counts (acta_jobs: countJobs)', () => {
    test("the namespace's Ready and Executing jobs by definition, each status up to its cap (the oldest by id); finished ones and another namespace's not counted", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['p', 'q']);
      await ids(ns, [0, 1, 2].map((i) => ({ definition: 'p', payload: { i } })));
      await ids(ns, [0, 1].map((i) => ({ definition: 'q', payload: { i } })));
      const rows = (await claim(ns, worker, ['q'], 2)).rows;
      await complete(worker, completion(rows.slice(0, 1)));
      await ids(fresh(), [{ definition: 'p' }]);
      const read = async (cap: number) => (await ledger.countJobs!(ns, cap)).sort((a, b) => (a.status + a.definition < b.status + b.definition ? -1 : 1));
      expect(await read(100)).toEqual([
        { definition: 'q', status: 'executing', count: 1 },
        { definition: 'p', status: 'ready', count: 3 },
      ]);
      expect(await read(2)).toEqual([
        { definition: 'q', status: 'executing', count: 1 },
        { definition: 'p', status: 'ready', count: 2 },
      ]);
    });
  });

  describe('retention (acta.prune_jobs)', () => {
    test('finished rows past their state\'s age go with their attempts, oldest first, at most `limit` a call; rows inside it, live rows, other namespaces stay', async () => {
      const ns = fresh();
      const other = fresh();
      const worker = await declare(ns, ['r']);
      const [succeeded, failed, cancelled, running] = await ids(ns, [0, 1, 2, 3].map((i) => ({ definition: 'r', payload: { i }, maxAttempts: 1 })));
      const rows = byId((await claim(ns, worker, ['r'], 2)).rows);
      await complete(worker, [...completion(rows.slice(0, 1)), ...completion(rows.slice(1, 2), 'failed')]);
      expect(await ledger.cancelJob(ns, cancelled)).toBe('cancelled');
      await claim(ns, worker, ['r'], 1); // `running` stays Executing
      const [otherDone] = await ids(other, [{ definition: 'r' }]);
      const otherWorker = await declare(other, ['r']);
      await complete(otherWorker, completion((await claim(other, otherWorker, ['r'], 1)).rows));
      await h.advance(10_000);
      const [later] = await ids(ns, [{ definition: 'r', payload: { i: 4 } }]);
      await complete(worker, completion((await claim(ns, worker, ['r'], 1)).rows));
      await h.advance(1_000);
      const ages = { succeededMs: 5_000, cancelledMs: 5_000, failedMs: 5_000 };
      // Oldest first within a state, states in order succeeded, cancelled, failed: `limit` 1 takes the first Succeeded.
      expect(await ledger.pruneJobs({ namespace: ns, ages, limit: 1, timeoutMs: 10_000 })).toBe(1);
      expect(await ledger.readJob(ns, succeeded)).toBe(null);
      expect(await ledger.pruneJobs({ namespace: ns, ages: { ...ages, failedMs: null }, limit: 10, timeoutMs: 10_000 })).toBe(1);
      expect(await ledger.readJob(ns, cancelled)).toBe(null);
      expect(await job(ns, failed)).toMatchObject({ status: 'failed', executions: [{ outcome: 'failed_final' }] });
      expect(await ledger.pruneJobs({ namespace: ns, ages, limit: 10, timeoutMs: 10_000 })).toBe(1);
      expect(await ledger.readJob(ns, failed)).toBe(null);
      expect(await ledger.pruneJobs({ namespace: ns, ages, limit: 10, timeoutMs: 10_000 })).toBe(0);
      expect(await job(ns, running)).toMatchObject({ status: 'executing' });
      expect(await job(ns, later)).toMatchObject({ status: 'succeeded', executions: [{ outcome: 'succeeded' }] });
      expect(await job(other, otherDone)).toMatchObject({ status: 'succeeded' });
      // Age 0: every row finished before the call.
      expect(await ledger.pruneJobs({ namespace: ns, ages: { succeededMs: 0, cancelledMs: null, failedMs: null }, limit: 10, timeoutMs: 10_000 })).toBe(1);
      expect(await ledger.readJob(ns, later)).toBe(null);
      // A deleted job's idempotency key is free again.
      const [keyed] = await ids(ns, [{ definition: 'r', idempotencyKey: 'k' }]);
      await complete(worker, completion((await claim(ns, worker, ['r'], 1)).rows));
      await h.advance(1);
      expect(await ledger.pruneJobs({ namespace: ns, ages: { succeededMs: 0, cancelledMs: null, failedMs: null }, limit: 10, timeoutMs: 10_000 })).toBe(1);
      const again = await enqueue(ns, [{ definition: 'r', idempotencyKey: 'k' }]);
      expect(again[0]).toMatchObject({ created: true });
      expect(again[0].id).not.toBe(keyed);
    });
  });

  describe('alerts (acta.evaluate_alerts)', () => {
    const thresholds = { deadWindowMs: DEAD_AFTER_MS * 10, readyAgeMs: 300_000, failureWindowMs: 900_000, failureRate: 0.5, failureMinJobs: 3, keepResolvedMs: 86_400_000, scheduleLateMs: 60_000 };
    const evaluate = (namespace: string) => ledger.evaluateAlerts({ namespace, thresholds, onAlert: 'notify' });
    const changes = (rows: { change: string | null; rule: string; subject: string }[]) => rows.filter((r) => r.change !== null).map((r) => [r.change, r.rule, r.subject]);

    test('each rule is raised once and resolved once across evaluations, with one onAlert job per change', async () => {
      const ns = fresh();
      const first = await declare(ns, ['d']);
      const [job1] = await ids(ns, [{ definition: 'd' }]);
      expect(changes(await evaluate(ns))).toEqual([]);
      await h.advance(DEAD_AFTER_MS + 1);
      await recover(ns); // marks the silent worker dead
      expect(changes(await evaluate(ns))).toEqual([
        ['raised', 'no_live_worker', 'd'],
        ['raised', 'oldest_ready', 'd'],
        ['raised', 'worker_dead', first],
      ]);
      expect(changes(await evaluate(ns))).toEqual([]);
      const second = await declare(ns, ['d', 'notify']);
      expect(changes(await evaluate(ns))).toEqual([['resolved', 'no_live_worker', 'd']]);
      const claimed = await claim(ns, second, ['d'], 1);
      expect(claimed.rows.map((r) => r.id)).toEqual([job1]);
      await complete(second, completion(claimed.rows, 'failed_final'));
      expect(changes(await evaluate(ns))).toEqual([['resolved', 'oldest_ready', 'd']]);
      // Failure rate: 3 of 3 ended Failed in the window.
      for (const id of await ids(ns, [{ definition: 'd' }, { definition: 'd' }])) expect(id).toEqual(expect.any(String));
      await complete(second, completion((await claim(ns, second, ['d'], 2)).rows, 'failed_final'));
      const raised = await evaluate(ns);
      expect(changes(raised)).toEqual([['raised', 'failure_rate', 'd']]);
      expect(raised.find((r) => r.rule === 'failure_rate')?.detail).toEqual({ failed: 3, succeeded: 0, windowMs: 900_000 });
      expect(changes(await evaluate(ns))).toEqual([]);
      const sent = (await claim(ns, second, ['notify'], 100)).rows.map((r) => r.payload as { change: string; rule: string; subject: string });
      expect(sent.map((p) => [p.change, p.rule, p.subject])).toEqual([
        ['raised', 'no_live_worker', 'd'],
        ['raised', 'oldest_ready', 'd'],
        ['raised', 'worker_dead', first],
        ['resolved', 'no_live_worker', 'd'],
        ['resolved', 'oldest_ready', 'd'],
        ['raised', 'failure_rate', 'd'],
      ]);
      expect(await ledger.readAlerts(ns)).toEqual([
        { rule: 'failure_rate', subject: 'd', open: true },
        { rule: 'no_live_worker', subject: 'd', open: false },
        { rule: 'oldest_ready', subject: 'd', open: false },
        { rule: 'worker_dead', subject: first, open: true },
      ]);
    });

    test("detail's instants are ISO 8601 in UTC as toISOString writes them, as raisedAt and resolvedAt are, whatever the session's TimeZone", async () => {
      const ns = fresh();
      await declare(ns, ['d']);
      await ids(ns, [{ definition: 'd' }]);
      await h.advance(DEAD_AFTER_MS + 1);
      await recover(ns); // marks the silent worker dead
      const rows = await ledger.evaluateAlerts({ namespace: ns, thresholds, onAlert: null });
      const instants = rows.flatMap((r) => Object.entries(r.detail ?? {}).filter(([k]) => k.endsWith('At')).map(([k, v]) => [r.rule, k, v]));
      expect(instants.map(([rule, k]) => [rule, k])).toEqual([['no_live_worker', 'oldestDueAt'], ['oldest_ready', 'oldestDueAt'], ['worker_dead', 'lastHeartbeatAt']]);
      for (const [, , v] of instants) expect(v).toEqual(new Date(v as string).toISOString());
    });

    test("onAlert's jobs are admitted by its definition's policies: keyed by its name for a concurrency limit or a rate, and one lane, as sys.outbox keys a subscriber's", async () => {
      const ns = fresh();
      const notify = defineJob({ name: 'notify', handler, concurrency: { key: () => 'slack', limit: 1 }, rate: { key: () => 'slack', limit: 1, perMs: 60_000 }, lane: () => 'slack' });
      const worker = await declare(ns, ['a', 'b', notify]);
      await ids(ns, [{ definition: 'a' }, { definition: 'b' }]);
      await h.advance(thresholds.readyAgeMs + 1);
      expect(changes(await ledger.evaluateAlerts({ namespace: ns, thresholds, onAlert: 'notify' }))).toEqual([
        ['raised', 'oldest_ready', 'a'],
        ['raised', 'oldest_ready', 'b'],
      ]);
      const claimed = (await claim(ns, worker, ['notify'], 100)).rows;
      expect(claimed.length).toBe(1); // one at a time, one start a minute
      expect(await ledger.readJob(ns, claimed[0].id as string)).toMatchObject({ concurrencyKey: 'notify', rateKey: 'notify', lane: 'notify' });
    });

    test("a pause (the definition's or the namespace's) raises no oldest_ready or no_live_worker for the due jobs it holds; its resume raises them", async () => {
      const ns = fresh();
      const silent = await declare(ns, ['held', 'orphan']); // recovery marks it dead: 'orphan' has no live worker
      const live = await declare(ns, ['held', 'free']);
      await ids(ns, [{ definition: 'held' }, { definition: 'free' }, { definition: 'orphan' }]);
      await ledger.pause({ namespace: ns, definition: 'held' });
      await ledger.pause({ namespace: ns, definition: 'orphan' });
      await h.advance(DEAD_AFTER_MS + 1); // past readyAgeMs too
      await beat(live, ns, []);
      await recover(ns);
      expect(changes(await evaluate(ns))).toEqual([
        ['raised', 'oldest_ready', 'free'],
        ['raised', 'worker_dead', silent],
      ]);
      await ledger.resume({ namespace: ns, definition: 'held' });
      await ledger.resume({ namespace: ns, definition: 'orphan' });
      expect(changes(await evaluate(ns))).toEqual([
        ['raised', 'no_live_worker', 'orphan'],
        ['raised', 'oldest_ready', 'held'],
        ['raised', 'oldest_ready', 'orphan'],
      ]);
      await ledger.pause({ namespace: ns });
      expect(changes(await evaluate(ns))).toEqual([
        ['resolved', 'no_live_worker', 'orphan'],
        ['resolved', 'oldest_ready', 'free'],
        ['resolved', 'oldest_ready', 'held'],
        ['resolved', 'oldest_ready', 'orphan'],
      ]);
    });
  });

  describe('cancelling a running job', () => {
    test("the request is kept, sent to the holder (NOTIFY 'cancel:<worker>:<job>:<execution>') and repeated by its heartbeats, which still renew the lease", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['r']);
      await enqueue(ns, [{ definition: 'r' }, { definition: 'r' }]);
      const rows = byId((await claim(ns, worker, ['r'], 2)).rows);
      const got: string[] = [];
      const unlisten = await ledger.listen('acta_jobs', { onNotify: (p) => got.push(p) });
      try {
        expect(await ledger.cancelJob(ns, rows[0].id)).toBe('requested');
        const sent = `cancel:${worker}:${rows[0].id}:${rows[0].execution}`;
        await waitFor(() => got.includes(sent), `the cancel's NOTIFY (got ${JSON.stringify(got)})`);
      } finally {
        await unlisten();
      }
      const first = (await job(ns, rows[0].id)).cancelRequestedAt;
      await h.advance(10);
      expect(await ledger.cancelJob(ns, rows[0].id)).toBe('requested');
      expect((await job(ns, rows[0].id)).cancelRequestedAt).toEqual(first); // the first request's time
      expect(await beat(worker, ns, held(rows))).toMatchObject({ renewed: held(rows.slice(1)), cancel: held(rows.slice(0, 1)), lost: [] });
      await h.advance(LEASE_MS - 1_000);
      expect(await recover(ns)).toEqual([]); // renewed by that beat
    });

    test('its attempt ends the job Cancelled (uncharged, no retry, the lane handed on) whatever it sent, unless it succeeded', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'x', handler, lane: () => 'l' }), 'y']);
      const [laned, behind] = await ids(ns, [0, 1].map((i) => ({ definition: 'x', payload: { i }, lane: 'l' })));
      const [failing, rateLimited, handedBack, succeeding] = await ids(ns, [2, 3, 4, 5].map((i) => ({ definition: 'y', payload: { i } })));
      const rows = byId((await claim(ns, worker, ['x', 'y'], 10)).rows);
      expect(rows.map((r) => r.id)).toEqual([laned, failing, rateLimited, handedBack, succeeding]);
      for (const r of rows) expect(await ledger.cancelJob(ns, r.id)).toBe('requested');
      const [l, f, rl, hb, su] = rows;
      const acks = await complete(worker, [
        ...completion([l], 'cancelled', 0, { error: JSON.stringify({ name: 'JobCancelledError', message: 'c' }) }),
        ...completion([f], 'failed', 60_000),
        ...completion([rl], 'rate_limited', 60_000),
        ...completion([hb], 'handed_back'),
        ...completion([su], 'succeeded', 0, { result: '"done"' }),
      ]);
      expect(statusesOf(acks)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled', 'succeeded']);
      expect(await job(ns, laned)).toMatchObject({ status: 'cancelled', attempts: 0, finishedAt: expect.any(Date), error: { name: 'JobCancelledError' }, executions: [{ outcome: 'cancelled', charged: false }] });
      expect(await job(ns, failing)).toMatchObject({ status: 'cancelled', attempts: 0, error: { message: 'x' }, executions: [{ outcome: 'cancelled', charged: false }] });
      expect((await job(ns, rateLimited)).status).toBe('cancelled');
      expect((await job(ns, handedBack)).status).toBe('cancelled');
      expect(await job(ns, succeeding)).toMatchObject({ status: 'succeeded', result: 'done', cancelRequestedAt: expect.any(Date) });
      // The lane went on to the row behind its cancelled head.
      expect((await claim(ns, worker, ['x', 'y'], 10)).rows.map((r) => r.id)).toEqual([behind]);
    });

    test('recovery ends a lost attempt of a job asked to cancel Cancelled, and hands its lane on', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'x', handler, lane: () => 'l' })]);
      const [head, behind] = await ids(ns, [0, 1].map((i) => ({ definition: 'x', payload: { i }, lane: 'l' })));
      const [row] = (await claim(ns, worker, ['x'], 10, 1_000)).rows;
      expect(row.id).toBe(head);
      await beat(worker, ns, held([row]), 1_000);
      expect(await ledger.cancelJob(ns, head)).toBe('requested');
      await h.advance(1_001);
      expect(await recover(ns)).toEqual([{ id: head, execution: 1, status: 'cancelled', charged: true }]);
      expect(await job(ns, head)).toMatchObject({ status: 'cancelled', finishedAt: expect.any(Date), executions: [{ outcome: 'lost', charged: true }] });
      expect((await claim(ns, worker, ['x'], 10)).rows.map((r) => r.id)).toEqual([behind]);
    });
  });

  describe('progress and watched jobs', () => {
    test("report_progress stores each running attempt's value, fenced as a completion: not another execution's, holder's, or a finished job's", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['p']);
      const other = await declare(ns, ['p']);
      await enqueue(ns, [{ definition: 'p' }, { definition: 'p' }]);
      const rows = byId((await claim(ns, worker, ['p'], 2)).rows);
      const [a, b] = rows;
      expect(await ledger.reportProgress(worker, [{ id: a.id, execution: a.execution, json: '{"done":1}' }, { id: b.id, execution: b.execution, json: '[1,"two"]' }])).toBe(2);
      expect(await ledger.reportProgress(other, [{ id: a.id, execution: a.execution, json: '2' }])).toBe(0);
      expect(await ledger.reportProgress(worker, [{ id: a.id, execution: a.execution + 1, json: '3' }])).toBe(0);
      await complete(worker, completion([b]));
      expect(await ledger.reportProgress(worker, [{ id: b.id, execution: b.execution, json: '4' }])).toBe(0);
      expect((await job(ns, a.id)).progress).toEqual({ done: 1 });
      expect(await job(ns, b.id)).toMatchObject({ status: 'succeeded', progress: [1, 'two'] });
    });

    test("a watched job notifies 'acta_job' with its id when its status, attempt, progress or cancel request changes; an unwatched one never", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['w']);
      const [watched, unwatched] = await ids(ns, [{ definition: 'w' }, { definition: 'w' }]);
      expect(await ledger.watchJob(ns, watched)).toBe(true);
      expect(await ledger.watchJob(fresh(), watched)).toBe(false);
      expect(await ledger.watchJob(ns, '999999999')).toBe(false);
      const got: string[] = [];
      const unlisten = await ledger.listen('acta_job', { onNotify: (id) => got.push(id) });
      const seen = async (what: string, n: number) => waitFor(() => got.filter((id) => id === watched).length >= n, `${what} (got ${JSON.stringify(got)})`);
      try {
        const rows = byId((await claim(ns, worker, ['w'], 2)).rows);
        await seen('the claim', 1);
        await ledger.reportProgress(worker, rows.map((r) => ({ id: r.id, execution: r.execution, json: '1' })));
        await seen('the progress', 2);
        await ledger.cancelJob(ns, watched);
        await seen('the cancel request', 3);
        await complete(worker, completion(rows, 'failed', 0));
        await seen('the end', 4);
        // A marker: a change of another watched job, sent after all of the above.
        const [marker] = await ids(ns, [{ definition: 'm' }]);
        await ledger.watchJob(ns, marker);
        await ledger.cancelJob(ns, marker);
        await waitFor(() => got.includes(marker), 'the marker');
        expect(got.filter((id) => id === unwatched)).toEqual([]);
      } finally {
        await unlisten();
      }
    });
  });

  describe('wakeups', () => {
    test("a completion wakes its worker's namespace when a row is Ready again (a retry, a hand-back); a success alone does not", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['w']);
      await enqueue(ns, [0, 1, 2].map((i) => ({ definition: 'w', payload: { i } })));
      const rows = byId((await claim(ns, worker, ['w'], 3)).rows);
      expect(await woken(() => complete(worker, completion(rows.slice(0, 1))))).toEqual([]);
      expect(await woken(() => complete(worker, completion(rows.slice(1, 2), 'failed', 60_000)))).toEqual([ns]);
      expect(await woken(() => complete(worker, completion(rows.slice(2, 3), 'handed_back')))).toEqual([ns]);
    });
  });

  describe('pause and resume', () => {
    test('a paused namespace claims nothing (idle, no due time) and keeps its rows Ready; resume wakes it and the claim takes them', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['p', 'q']);
      const [a, b] = await ids(ns, [{ definition: 'p' }, { definition: 'q' }]);
      const before = await h.now();
      let paused: Awaited<ReturnType<Ledger['pause']>> | undefined;
      expect(await woken(async () => (paused = await ledger.pause({ namespace: ns, by: 'ops@host', reason: 'incident 7' })))).toEqual([ns]);
      expect(paused).toMatchObject({ namespace: ns, definition: null, pausedBy: 'ops@host', reason: 'incident 7', created: true });
      expect(Number(paused!.pausedAt)).toBeGreaterThanOrEqual(before - 1);
      // A second pause of the same scope leaves the first standing.
      expect(await ledger.pause({ namespace: ns, by: 'someone else' })).toMatchObject({ pausedBy: 'ops@host', reason: 'incident 7', created: false });
      expect(await claim(ns, worker, ['p', 'q'], 10)).toEqual({ rows: [], nextDueInMs: null });
      expect((await job(ns, a)).status).toBe('ready');
      // Another namespace is not paused.
      const other = fresh();
      await enqueue(other, [{ definition: 'p' }]);
      expect((await claim(other, worker, ['p'], 10)).rows).toHaveLength(1);
      expect((await ledger.listPauses(ns)).map((p) => [p.definition, p.pausedBy])).toEqual([[null, 'ops@host']]);
      let resumed: boolean | undefined;
      expect(await woken(async () => (resumed = await ledger.resume({ namespace: ns })))).toEqual([ns]);
      expect(resumed).toBe(true);
      expect(await woken(async () => (resumed = await ledger.resume({ namespace: ns })))).toEqual([]);
      expect(resumed).toBe(false);
      expect(byId((await claim(ns, worker, ['p', 'q'], 10)).rows).map((r) => r.id)).toEqual([a, b]);
    });

    test("a paused definition is left out of the claim, the others' rows are claimed; its idle answer is no due time; the namespace's resume leaves it paused", async () => {
      const ns = fresh();
      const worker = await declare(ns, ['p', 'q']);
      const now = await h.now();
      const [a, b] = await ids(ns, [{ definition: 'p' }, { definition: 'q' }, { definition: 'p', runAt: new Date(now + 60_000) }]);
      await ledger.pause({ namespace: ns, definition: 'p' });
      expect((await claim(ns, worker, ['p', 'q'], 10)).rows.map((r) => r.id)).toEqual([b]);
      expect(await claim(ns, worker, ['p'], 10)).toEqual({ rows: [], nextDueInMs: null });
      expect(await ledger.resume({ namespace: ns })).toBe(false);
      expect(await claim(ns, worker, ['p'], 10)).toEqual({ rows: [], nextDueInMs: null });
      expect(await ledger.resume({ namespace: ns, definition: 'p' })).toBe(true);
      expect((await claim(ns, worker, ['p'], 10)).rows.map((r) => r.id)).toEqual([a]);
    });
  });

  describe('concurrency keys', () => {
    const rebuild = defineJob({ name: 'rebuild', handler, concurrency: { key: (p: { tenant: string; i: number }) => `tenant:${p.tenant}`, limit: 3 } });
    const acme = (i: number): Item => ({ definition: 'rebuild', payload: { tenant: 'acme', i }, concurrencyKey: 'tenant:acme' });

    test('a batch claim never starts more attempts of a key than its free slots; the refused rows wait parked, uncharged, and the idle answer is the bounce', async () => {
      const ns = fresh();
      const worker = await declare(ns, [rebuild]);
      const jobIds = await ids(ns, [...Array.from({ length: 10 }, (_, i) => acme(i)), { definition: 'rebuild', payload: { tenant: 'other', i: 100 }, concurrencyKey: 'tenant:other' }]);
      const first = await claim(ns, worker, ['rebuild'], 100);
      expect(payloadsOf(first.rows)).toEqual([0, 1, 2, 100].map((i) => ({ tenant: i === 100 ? 'other' : 'acme', i })));
      expect(await parked(ns, jobIds)).toEqual([3, 4, 5, 6, 7, 8, 9].map((i) => [i, 'concurrency']));
      expect(await job(ns, jobIds[3])).toMatchObject({ status: 'ready', concurrencyKey: 'tenant:acme', rateKey: null, lane: null, blockedBy: 'concurrency', attempts: 0, execution: 0 });
      const idle = await claim(ns, worker, ['rebuild'], 100);
      expect(idle.rows).toEqual([]);
      expect(idle.nextDueInMs).toBeGreaterThan(1_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(2_000);
    });

    test('a completion hands its slot to the first parked row of the key, in order, in the same call, and wakes the namespace; every way an attempt ends frees its slot; a newer row does not pass a parked one', async () => {
      const ns = fresh();
      const worker = await declare(ns, [rebuild]);
      const jobIds = await ids(ns, Array.from({ length: 6 }, (_, i) => acme(i)));
      const first = byId((await claim(ns, worker, ['rebuild'], 10)).rows);
      expect(iOf(first)).toEqual([0, 1, 2]);
      const [late] = await ids(ns, [acme(99)]); // after the parked ones
      expect(await woken(async () => expect(statusesOf(await complete(worker, completion(first.slice(0, 1))))).toEqual(['succeeded']))).toEqual([ns]);
      expect(await parked(ns, [...jobIds, late])).toEqual([
        [4, 'concurrency'],
        [5, 'concurrency'],
      ]);
      expect(iOf((await claim(ns, worker, ['rebuild'], 10)).rows)).toEqual([3]);
      expect(await parked(ns, [...jobIds, late])).toEqual([4, 5, 99].map((i) => [i, 'concurrency']));
      // A retry and a hand-back free their slots: the parked rows go first, then 99, then the
      // handed-back row (due now, after them).
      await h.advance(10);
      await complete(worker, [...completion(first.slice(1, 2), 'failed', 60_000), ...completion(first.slice(2, 3), 'handed_back')]);
      expect(iOf((await claim(ns, worker, ['rebuild'], 10)).rows)).toEqual([4, 5]);
      expect(await parked(ns, [...jobIds, late])).toEqual([2, 99].map((i) => [i, 'concurrency']));
      // The key holds its limit.
      const executing = (await Promise.all([...jobIds, late].map((id) => job(ns, id)))).filter((j) => j.status === 'executing');
      expect(executing.map((j) => (j.payload as { i: number }).i)).toEqual([3, 4, 5]);
    });

    test("a key's burst at its limit, first in the queue, does not hold other keys back: the claim that meets it whole parks the rest of it and takes the rows behind", async () => {
      const ns = fresh();
      const worker = await declare(ns, [rebuild]);
      const burst = await ids(ns, Array.from({ length: 2_000 }, (_, i) => ({ definition: 'rebuild', payload: { tenant: 'burst', i }, concurrencyKey: 'tenant:burst' })));
      await ids(ns, Array.from({ length: 5 }, (_, i) => ({ definition: 'rebuild', payload: { tenant: `lone-${i}`, i: 10_000 + i }, concurrencyKey: `tenant:lone-${i}` })));
      const got = await claim(ns, worker, ['rebuild'], 8);
      // 3 of the burst (its limit); the next round's candidates are all refused: the burst is
      // parked in one statement, and the lone tenants behind it are reached in the same claim.
      expect(got.rows.map((r) => (r.payload as { tenant: string }).tenant)).toEqual(['burst', 'burst', 'burst', 'lone-0', 'lone-1', 'lone-2', 'lone-3', 'lone-4']);
      expect((await parked(ns, burst)).length).toBe(1_997);
      // Order kept: the hand-on releases the burst's rows from its oldest.
      await complete(worker, completion(got.rows.slice(0, 1)));
      expect(payloadsOf((await claim(ns, worker, ['rebuild'], 8)).rows)).toEqual([{ tenant: 'burst', i: 3 }]);
    });

    test('a round refused whole parks only its gates\' due rows of the claim\'s definitions; a lane\'s rows behind its head whatever their definition', async () => {
      const ns = fresh();
      const meter = defineJob({ name: 'meter', handler, rate: { limit: 2, perMs: 60_000 } });
      const worker = await declare(ns, [meter, 'lane', 'elsewhere']);
      const now = await h.now();
      const metered = await ids(ns, Array.from({ length: 30 }, (_, i) => ({ definition: 'meter', payload: { i }, rateKey: 'm' })));
      const long = await ids(ns, Array.from({ length: 30 }, (_, i) => ({ definition: 'lane', payload: { i: 100 + i }, lane: 'long' })));
      const [later, otherDefinition, laneElsewhere] = await ids(ns, [
        { definition: 'meter', payload: { i: 200 }, rateKey: 'm', runAt: new Date(now + 60_000) },
        { definition: 'elsewhere', payload: { i: 201 }, rateKey: 'm' },
        { definition: 'elsewhere', payload: { i: 202 }, lane: 'long' },
      ]);
      await ids(ns, [0, 1, 2].map((i) => ({ definition: 'lane', payload: { i: 300 + i }, lane: `short-${i}` })));
      // Round 1: 2 of the meter admitted; round 2: its next candidate refused, a round refused whole:
      // the meter's due rows parked; round 3 reaches the lane.
      expect(iOf((await claim(ns, worker, ['meter', 'lane'], 3)).rows)).toEqual([0, 1, 100]);
      // Round 1: the lane's rows behind its running head, refused whole: the lane's rows parked;
      // round 2 reaches the short lanes.
      expect(iOf((await claim(ns, worker, ['meter', 'lane'], 3)).rows)).toEqual([300, 301, 302]);
      expect((await parked(ns, metered)).length).toBe(28);
      expect((await parked(ns, long)).length).toBe(29);
      expect((await job(ns, later)).blockedBy).toBeNull(); // not due
      expect((await job(ns, otherDefinition)).blockedBy).toBeNull(); // not this claim's definition
      expect((await job(ns, laneElsewhere)).blockedBy).toBe('lane'); // a lane is the namespace's
    });

    test('a plain and a fair definition in one claim take turns at one priority', async () => {
      const ns = fresh();
      const worker = await declare(ns, ['plain', defineJob({ name: 'fair', handler, fair: true, concurrency: { key: () => 'k' } })]);
      await enqueue(ns, [0, 1, 2, 3].map((i) => ({ definition: 'plain', payload: { i } })));
      await enqueue(ns, [0, 1, 2, 3].map((i) => ({ definition: 'fair', payload: { i: 10 + i }, concurrencyKey: 'k' })));
      // Claimed in turns, and returned in that claim order (claim_jobs.sql, Contract).
      expect(iOf((await claim(ns, worker, ['plain', 'fair'], 4)).rows)).toEqual([0, 10, 1, 11]);
    });

    test('one key across definitions shares its slots; each definition admits up to its own limit', async () => {
      const ns = fresh();
      const one = defineJob({ name: 'one', handler, concurrency: { limit: 1 } });
      const two = defineJob({ name: 'two', handler, concurrency: { limit: 2 } });
      const worker = await declare(ns, [one, two]);
      const jobIds = await ids(ns, [
        { definition: 'two', payload: { i: 0 }, concurrencyKey: 'shared' },
        { definition: 'one', payload: { i: 1 }, concurrencyKey: 'shared' },
        { definition: 'two', payload: { i: 2 }, concurrencyKey: 'shared' },
      ]);
      expect(iOf((await claim(ns, worker, ['one', 'two'], 10)).rows)).toEqual([0]);
      expect(await parked(ns, jobIds)).toEqual([
        [1, 'concurrency'],
        [2, 'concurrency'],
      ]);
    });

    test('a slot is held until the attempt ends or recovery returns its row: an expired lease not yet recovered still holds it; recovery hands it on and wakes the namespace', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'solo', handler, concurrency: { limit: 1 } })]);
      const jobIds = await ids(ns, [0, 1].map((i) => ({ definition: 'solo', payload: { i }, concurrencyKey: 'k' })));
      const holding = await claim(ns, worker, ['solo'], 10, 1_000);
      expect(iOf(holding.rows)).toEqual([0]);
      await h.advance(1_001);
      const other = randomUUID();
      expect((await claim(ns, other, ['solo'], 10)).rows).toEqual([]);
      // The stalled holder wakes up: its heartbeat still renews (nobody took its slot or its row).
      expect((await beat(worker, ns, held(holding.rows), 1_000)).renewed).toHaveLength(1);
      await h.advance(1_001);
      let recovered: unknown[] = [];
      expect(await woken(async () => (recovered = await recover(ns)))).toEqual([ns]);
      expect(recovered).toMatchObject([{ status: 'ready', charged: true }]);
      expect(await parked(ns, jobIds)).toEqual([]);
      expect(iOf((await claim(ns, other, ['solo'], 10)).rows)).toEqual([1]);
      expect(statusesOf(await complete(worker, completion(holding.rows)))).toEqual(['stale']);
      expect((await claim(ns, randomUUID(), ['solo'], 10)).rows).toEqual([]);
    });

    test('a gate whose recheck has come releases what it has room for, and wakes the namespace: a limit raised by a new declaration lets parked rows run at the next claim', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'grow', handler, concurrency: { limit: 1 } })]);
      const jobIds = await ids(ns, [0, 1, 2, 3].map((i) => ({ definition: 'grow', payload: { i }, concurrencyKey: 'k' })));
      expect((await claim(ns, worker, ['grow'], 10)).rows).toHaveLength(1);
      expect(await parked(ns, jobIds)).toHaveLength(3);
      await ledger.stopWorker(worker);
      // The policy changed: the key's recheck is now (acta.recheck_gates), not after the bounce.
      const next = await declare(ns, [defineJob({ name: 'grow', handler, concurrency: { limit: 3 } })], { build: 'b2' });
      let got: ClaimedRow[] = [];
      expect(await woken(async () => (got = (await claim(ns, next, ['grow'], 10)).rows))).toEqual([ns]);
      expect(iOf(got)).toEqual([1, 2]);
      expect(await parked(ns, jobIds)).toEqual([[3, 'concurrency']]);
    });

    test('a new row of a key does not pass its parked rows even while the key has room: the claim parks it behind them, and the slot handed on goes to them first', async () => {
      const ns = fresh();
      // Two definitions share the key: "wide" has room (1 of 3 held) while "narrow"'s rows wait parked.
      const worker = await declare(ns, [defineJob({ name: 'narrow', handler, concurrency: { limit: 1 } }), defineJob({ name: 'wide', handler, concurrency: { limit: 3 } })]);
      const jobIds = await ids(ns, [0, 1, 2].map((i) => ({ definition: 'narrow', payload: { i }, concurrencyKey: 'k' })));
      const first = await claim(ns, worker, ['narrow', 'wide'], 10);
      expect(iOf(first.rows)).toEqual([0]);
      await h.advance(10);
      const [late] = await ids(ns, [{ definition: 'wide', payload: { i: 3 }, concurrencyKey: 'k' }]);
      expect((await claim(ns, worker, ['narrow', 'wide'], 10)).rows).toEqual([]);
      expect(await parked(ns, [...jobIds, late])).toEqual([1, 2, 3].map((i) => [i, 'concurrency']));
      // The slot handed on goes to the first parked row, not to the newer one.
      expect(await woken(() => complete(worker, completion(first.rows)))).toEqual([ns]);
      expect(iOf((await claim(ns, worker, ['narrow', 'wide'], 10)).rows)).toEqual([1]);
      expect(await parked(ns, [...jobIds, late])).toEqual([2, 3].map((i) => [i, 'concurrency']));
    });
  });

  describe('rate limits', () => {
    const call = defineJob({ name: 'call', handler, rate: { key: (p: { account: string; i: number }) => p.account, limit: 2, perMs: 60_000 } });
    const account = (name: string, i: number): Item => ({ definition: 'call', payload: { account: name, i }, rateKey: name });

    test('a meter admits `limit` starts per window across claims; the refused wait parked for the next free token, which the idle answer names; a window later, tokens free in order', async () => {
      const ns = fresh();
      const worker = await declare(ns, [call]);
      const jobIds = await ids(ns, [0, 1, 2, 3, 4].map((i) => account('a', i)));
      const first = await claim(ns, worker, ['call'], 10);
      expect(iOf(first.rows)).toEqual([0, 1]);
      expect(await parked(ns, jobIds)).toEqual([2, 3, 4].map((i) => [i, 'rate']));
      // Completing them frees no token: the window counts starts. 20 s later a new row is parked
      // behind the others, and the next token is still the one the first start frees.
      await complete(worker, completion(first.rows));
      await h.advance(20_000);
      const [late] = await ids(ns, [account('a', 5)]);
      const idle = await claim(ns, randomUUID(), ['call'], 10);
      expect(idle.rows).toEqual([]);
      expect(idle.nextDueInMs).toBeGreaterThan(38_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(40_000);
      await h.advance(41_000);
      expect(iOf((await claim(ns, worker, ['call'], 10)).rows)).toEqual([2, 3]);
      expect(await parked(ns, [...jobIds, late])).toEqual([4, 5].map((i) => [i, 'rate']));
    });

    test('a rate-limited attempt ends uncharged, is due after its delay, and holds its meter shut for everyone until then; its start still counts in the window', async () => {
      const ns = fresh();
      const worker = await declare(ns, [call]);
      const jobIds = await ids(ns, [account('a', 0), account('a', 1), account('b', 9)]);
      const [row] = (await claim(ns, worker, ['call'], 1)).rows;
      expect(statusesOf(await complete(worker, completion([row], 'rate_limited', 30_000)))).toEqual(['ready']);
      const limited = await job(ns, row.id);
      expect(limited).toMatchObject({ status: 'ready', attempts: 0, error: null, executions: [{ outcome: 'rate_limited', charged: false }] });
      expect(atAttemptEnd(limited.runAt.getTime() - 30_000, limited.executions[0])).toBe(true);
      // Meter 'a' is shut: its other row is refused; meter 'b' is not.
      expect(payloadsOf((await claim(ns, randomUUID(), ['call'], 10)).rows)).toEqual([{ account: 'b', i: 9 }]);
      expect(await parked(ns, jobIds)).toEqual([[1, 'rate']]);
      const idle = await claim(ns, randomUUID(), ['call'], 10);
      expect(idle.nextDueInMs).toBeGreaterThan(28_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(30_000);
      // Open again: one token left in the window (row 0's start counts), for the first in claim order.
      await h.advance(30_001);
      expect(iOf((await claim(ns, worker, ['call'], 10)).rows)).toEqual([1]);
      expect(await parked(ns, jobIds)).toEqual([[0, 'rate']]);
    });
  });

  describe('rate limits: the window exactly', () => {
    const meter = (limit: number, perMs: number) => defineJob({ name: 'call', handler, rate: { key: (p: { i: number }) => 'm', limit, perMs } });
    const row = (i: number): Item => ({ definition: 'call', payload: { i }, rateKey: 'm' });
    /** The starts of the meter's attempts (claimedAt in the attempt ledger), each attempt completed when claimed. */
    const startsOf = async (ns: string, jobIds: string[]) =>
      (await Promise.all(jobIds.map((id) => job(ns, id)))).flatMap((j) => j.executions.map((e) => e.claimedAt.getTime())).sort((a, b) => a - b);
    /** The most starts any window of perMs holds: the window ending at each start (a window's count only rises at a start). */
    const mostInAWindow = (starts: number[], perMs: number) => Math.max(0, ...starts.map((t) => starts.filter((s) => s > t - perMs && s <= t).length));
    const claimed = async (ns: string, worker: string, limit = 100) => {
      const { rows } = await claim(ns, worker, ['call'], limit);
      await complete(worker, completion(rows));
      return iOf(rows);
    };

    test('limit 3 per 100 s: the window counts starts, a token frees when the start it waits for is a window old, not before', async () => {
      const ns = fresh();
      const worker = await declare(ns, [meter(3, 100_000)]);
      const jobIds = await ids(ns, [0, 1, 2, 3, 4, 5, 6].map(row));
      expect(await claimed(ns, worker, 1)).toEqual([0]);
      await h.advance(40_000);
      expect(await claimed(ns, worker)).toEqual([1, 2]);
      expect(await parked(ns, jobIds)).toEqual([3, 4, 5, 6].map((i) => [i, 'rate']));
      // The next token: when the first start leaves the window, 60 s on.
      const idle = await claim(ns, randomUUID(), ['call'], 10);
      expect(idle.nextDueInMs).toBeGreaterThan(50_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(60_000);
      await h.advance(50_000);
      expect(await claimed(ns, worker)).toEqual([]);
      // Past it: one token (the two starts of 40 s still count), for the first in claim order.
      await h.advance(10_001);
      expect(await claimed(ns, worker)).toEqual([3]);
      const next = await claim(ns, randomUUID(), ['call'], 10);
      expect(next.nextDueInMs).toBeGreaterThan(30_000);
      expect(next.nextDueInMs).toBeLessThanOrEqual(40_000);
      await h.advance(30_000);
      expect(await claimed(ns, worker)).toEqual([]);
      await h.advance(10_000);
      expect(await claimed(ns, worker)).toEqual([4, 5]);
      await h.advance(200_001);
      expect(await claimed(ns, worker)).toEqual([6]);
      expect(mostInAWindow(await startsOf(ns, jobIds), 100_000)).toBe(3);
    });

    test('a window of an hour over many claims: each claim\'s starts leave it together, an hour after that claim, and no window holds more than the limit', async () => {
      const ns = fresh();
      const worker = await declare(ns, [meter(100, 3_600_000)]);
      const jobIds = await ids(ns, Array.from({ length: 210 }, (_, i) => row(i)));
      // Ten claims of ten, a minute apart: the window full.
      for (let c = 0; c < 10; c++) {
        expect(await claimed(ns, worker, 10)).toEqual(Array.from({ length: 10 }, (_, i) => c * 10 + i));
        await h.advance(60_000);
      }
      expect(await claimed(ns, worker, 10)).toEqual([]);
      // The next token: an hour after the first claim, which was ten minutes ago.
      const idle = await claim(ns, randomUUID(), ['call'], 10);
      expect(idle.nextDueInMs).toBeGreaterThan(3_000_000 - 60_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(3_000_000);
      await h.advance(3_000_001);
      // The first claim's ten starts have left; nine claims' remain.
      expect(await claimed(ns, worker)).toEqual(Array.from({ length: 10 }, (_, i) => 100 + i));
      // Ten minutes on, the other nine claims' starts have left too: 90 tokens.
      await h.advance(600_000);
      expect(await claimed(ns, worker)).toEqual(Array.from({ length: 90 }, (_, i) => 110 + i));
      expect(await claimed(ns, worker)).toEqual([]);
      expect(mostInAWindow(await startsOf(ns, jobIds), 3_600_000)).toBe(100);
    });

    test('a meter held shut by ctx.rateLimited opens when the retry is due, and then the window still counts its starts', async () => {
      const ns = fresh();
      const worker = await declare(ns, [meter(2, 100_000)]);
      const jobIds = await ids(ns, [0, 1, 2].map(row));
      const [first] = (await claim(ns, worker, ['call'], 1)).rows;
      await complete(worker, completion([first], 'rate_limited', 50_000));
      // Shut for 50 s though the window has a token.
      const idle = await claim(ns, randomUUID(), ['call'], 10);
      expect(idle.nextDueInMs).toBeGreaterThan(40_000);
      expect(idle.nextDueInMs).toBeLessThanOrEqual(50_000);
      await h.advance(40_000);
      expect(await claimed(ns, worker)).toEqual([]);
      // Open: one token (the limited attempt's start counts), for the first in claim order (row 0
      // is due again only now).
      await h.advance(10_001);
      expect(await claimed(ns, worker)).toEqual([1]);
      // The next: when the limited attempt's start leaves the window.
      const next = await claim(ns, randomUUID(), ['call'], 10);
      expect(next.nextDueInMs).toBeGreaterThan(40_000);
      expect(next.nextDueInMs).toBeLessThanOrEqual(50_000);
      await h.advance(50_000);
      expect(await claimed(ns, worker)).toEqual([2]);
      await h.advance(50_002);
      expect(await claimed(ns, worker)).toEqual([0]);
      expect(mostInAWindow(await startsOf(ns, jobIds), 100_000)).toBe(2);
    });
  });

  describe('lanes', () => {
    const step = defineJob({ name: 'step', handler, lane: (p: { order: string; i: number }) => p.order });
    const inLane = (order: string, i: number, definition = 'step'): Item => ({ definition, payload: { order, i }, lane: order });
    const laneOf = async (ns: string, jobIds: string[]) => (await Promise.all(jobIds.map((id) => job(ns, id)))).map((j) => [j.status, j.blockedBy]);

    test('only the head of a lane is claimable; its completion hands on to the next in the same call; lanes do not wait for each other', async () => {
      const ns = fresh();
      const worker = await declare(ns, [step]);
      const o1 = await ids(ns, [0, 1, 2].map((i) => inLane('o1', i)));
      await enqueue(ns, [inLane('o2', 10)]);
      const first = await claim(ns, worker, ['step'], 10);
      expect(payloadsOf(first.rows)).toEqual([{ order: 'o1', i: 0 }, { order: 'o2', i: 10 }]);
      expect(await laneOf(ns, o1)).toEqual([['executing', null], ['ready', 'lane'], ['ready', 'lane']]);
      expect(await woken(() => complete(worker, completion(first.rows.slice(0, 1))))).toEqual([ns]);
      expect(await laneOf(ns, o1)).toEqual([['succeeded', null], ['ready', null], ['ready', 'lane']]);
      expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o1', i: 1 }]);
    });

    test('a lane runs in commit order (docs/policies.md, "Lanes"): each enqueue call commits at once, a batch in its input order; priorities do not reorder it', async () => {
      const ns = fresh();
      const worker = await declare(ns, [step]);
      await enqueue(ns, [{ ...inLane('o', 0), priority: 0 }]);
      await enqueue(ns, [{ ...inLane('o', 1), priority: 9 }, { ...inLane('o', 2), priority: 5 }]);
      await enqueue(ns, [{ ...inLane('o', 3), priority: 99 }]);
      const order: number[] = [];
      for (let n = 0; n < 4; n++) {
        const { rows } = await claim(ns, worker, ['step'], 10);
        expect(rows).toHaveLength(1);
        order.push(...iOf(rows));
        await complete(worker, completion(rows));
      }
      expect(order).toEqual([0, 1, 2, 3]);
    });

    test('a retrying head keeps its lane waiting; a head that fails for good hands on; a cancelled head hands on', async () => {
      const ns = fresh();
      const worker = await declare(ns, [step]);
      const jobIds = await ids(ns, [0, 1, 2, 3].map((i) => inLane('o', i)));
      const [head] = (await claim(ns, worker, ['step'], 10)).rows;
      await complete(worker, completion([head], 'failed', 1_000));
      await h.advance(1_001);
      const again = await claim(ns, worker, ['step'], 10);
      expect(payloadsOf(again.rows)).toEqual([{ order: 'o', i: 0 }]);
      await complete(worker, completion(again.rows, 'failed_final'));
      const second = await claim(ns, worker, ['step'], 10);
      expect(payloadsOf(second.rows)).toEqual([{ order: 'o', i: 1 }]);
      await complete(worker, completion(second.rows, 'failed', 60_000));
      expect((await claim(ns, worker, ['step'], 10)).rows).toEqual([]); // the lane waits for its head
      expect(await woken(async () => expect(await ledger.cancelJob(ns, jobIds[1])).toBe('cancelled'))).toEqual([ns]);
      expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 2 }]);
    });

    test('a crash never strands a lane: recovery returns the head, still the head; a head whose attempts run out in recovery hands on', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'step', handler, lane: step.lane, maxAttempts: 1 })]);
      await enqueue(ns, [0, 1].map((i) => inLane('o', i)));
      const [head] = (await claim(ns, worker, ['step'], 10, 1_000)).rows;
      await h.advance(1_001);
      expect((await recover(ns)).map((r) => r.status)).toEqual(['ready']);
      const again = await claim(ns, worker, ['step'], 10, 1_000);
      expect(again.rows.map((r) => r.id)).toEqual([head.id]);
      // Started this time (a beat said so): charged, its one attempt used: Failed, and the lane moves on.
      await beat(worker, ns, held(again.rows), 1_000);
      await h.advance(1_001);
      let recovered: { status: string }[] = [];
      expect(await woken(async () => (recovered = await recover(ns)))).toEqual([ns]);
      expect(recovered.map((r) => r.status)).toEqual(['failed']);
      expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 1 }]);
    });

    test('a lane with its head due later waits for it: the rows behind are parked, and the head runs first when due', async () => {
      const ns = fresh();
      const worker = await declare(ns, [step]);
      const now = await h.now();
      const jobIds = await ids(ns, [
        { ...inLane('o', 0), runAt: new Date(now + 5_000) },
        inLane('o', 1),
        inLane('o', 2),
      ]);
      expect(await claim(ns, worker, ['step'], 10)).toMatchObject({ rows: [] });
      expect(await laneOf(ns, jobIds)).toEqual([['ready', null], ['ready', 'lane'], ['ready', 'lane']]);
      await h.advance(5_001);
      expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 0 }]);
    });
  });

  describe('lanes with a concurrency key', () => {
    const keyed = defineJob({ name: 'keyed', handler, lane: (p: { i: number }) => String(p.i), concurrency: { key: () => 'k', limit: 1 } });
    const setUp = async () => {
      const ns = fresh();
      const worker = await declare(ns, [keyed]);
      const [holder] = await ids(ns, [{ definition: 'keyed', payload: { i: 0 }, concurrencyKey: 'k' }]);
      const holding = await claim(ns, worker, ['keyed'], 10);
      expect(holding.rows.map((r) => r.id)).toEqual([holder]);
      // The lane's head passes its lane, and waits for the key's slot; the row behind it waits for the lane.
      const [head, next] = await ids(ns, [1, 2].map((i) => ({ definition: 'keyed', payload: { i }, concurrencyKey: 'k', lane: 'L' })));
      expect(await claim(ns, worker, ['keyed'], 10)).toMatchObject({ rows: [] });
      expect(await parked(ns, [head, next])).toEqual([
        [1, 'concurrency'],
        [2, 'lane'],
      ]);
      return { ns, worker, holding, head, next };
    };

    test("a lane's head parked on its key runs when the slot frees; then the lane goes on", async () => {
      const { ns, worker, holding } = await setUp();
      await complete(worker, completion(holding.rows));
      const headRun = await claim(ns, worker, ['keyed'], 10);
      expect(iOf(headRun.rows)).toEqual([1]);
      await complete(worker, completion(headRun.rows));
      expect(iOf((await claim(ns, worker, ['keyed'], 10)).rows)).toEqual([2]);
    });

    test("a lane's head parked on its key, cancelled, hands its lane on", async () => {
      const { ns, worker, holding, head } = await setUp();
      expect(await ledger.cancelJob(ns, head)).toBe('cancelled');
      await complete(worker, completion(holding.rows));
      await h.advance(2_001);
      expect(iOf((await claim(ns, worker, ['keyed'], 10)).rows)).toEqual([2]);
    });
  });

  describe('fair order', () => {
    const report = defineJob({ name: 'report', handler, fair: true, concurrency: { key: (p: { tenant: string; i: number }) => p.tenant } });
    const of = (tenant: string, i: number): Item => ({ definition: 'report', payload: { tenant, i }, concurrencyKey: tenant });
    const tenantsOf = (rows: ClaimedRow[]) => rows.map((r) => (r.payload as { tenant: string }).tenant);

    test("a tenant's burst does not hold another tenant's lone job back more than one claim; a tenant alone takes every row asked for", async () => {
      const ns = fresh();
      const worker = await declare(ns, [report]);
      await enqueue(ns, Array.from({ length: 1_000 }, (_, i) => of('big', i)));
      expect(tenantsOf((await claim(ns, worker, ['report'], 8)).rows)).toEqual(Array.from({ length: 8 }, () => 'big'));
      await h.advance(10);
      // A newcomer's burst takes turns from the one being served: it alternates with the big
      // tenant's, neither waiting behind its backlog nor jumping ahead of it.
      await enqueue(ns, [0, 1, 2].map((i) => of('small', i)));
      const next = await claim(ns, worker, ['report'], 4);
      expect(payloadsOf(next.rows)).toContainEqual({ tenant: 'small', i: 0 });
      expect(tenantsOf(next.rows).sort()).toEqual(['big', 'big', 'small', 'small']);
      expect(tenantsOf((await claim(ns, worker, ['report'], 3)).rows).sort()).toEqual(['big', 'big', 'small']);
    });

    test('a retried row gives up its turn and takes a new one when due', async () => {
      const ns = fresh();
      const worker = await declare(ns, [report]);
      await enqueue(ns, [0, 1, 2].map((i) => of('t', i)));
      const [first] = (await claim(ns, worker, ['report'], 1)).rows;
      await complete(worker, completion([first], 'failed', 1_000));
      await h.advance(1_001);
      // Due again: its turn comes after its tenant's rows waiting.
      expect(iOf((await claim(ns, worker, ['report'], 1)).rows)).toEqual([1]);
      expect(iOf((await claim(ns, worker, ['report'], 1)).rows)).toEqual([2]);
      expect(iOf((await claim(ns, worker, ['report'], 1)).rows)).toEqual([0]);
    });
  });

  describe('policies through deploys', () => {
    test('while live builds disagree the strictest limit applies, the newest declaration for the rest; the version moves and the heartbeat reports it; the old build stopped, the new limits apply', async () => {
      const ns = fresh();
      const v1 = defineJob({ name: 'sync', handler, timeoutMs: 1_000, maxAttempts: 3, concurrency: { limit: 3 }, rate: { limit: 10, perMs: 1_000 } });
      const v2 = defineJob({ name: 'sync', handler, timeoutMs: 2_000, maxAttempts: 5, backoff: { delayMs: 100, factor: 3 }, fair: true, concurrency: { limit: 5 }, rate: { limit: 100, perMs: 60_000 } });
      const read = async () => {
        const { version, policies } = await ledger.loadPolicies(ns, ['sync', 'unknown']);
        expect(policies).toHaveLength(1);
        return { version, ...policies[0] };
      };
      const old = await declare(ns, [v1, 'other'], { build: 'b1' });
      const first = await read();
      expect(first).toEqual({ version: first.version, name: 'sync', maxAttempts: 3, timeoutMs: 1_000, backoff: null, concurrencyLimit: 3, rateLimit: 10, ratePerMs: 1_000, fair: false, build: 'b1' });
      await h.advance(10);
      const newer = await declare(ns, [v2], { build: 'b2' });
      // b2 is the newest: its timeout, attempts, backoff, fair order; the limits are the strictest
      // of the two (3; 10 starts, b1's, over a minute, b2's window).
      const during = await read();
      expect(during).toEqual({ version: during.version, name: 'sync', maxAttempts: 5, timeoutMs: 2_000, backoff: { delayMs: 100, factor: 3 }, concurrencyLimit: 3, rateLimit: 10, ratePerMs: 60_000, fair: true, build: 'b2' });
      expect(during.version).toBeGreaterThan(first.version);
      // The same declaration again changes nothing: the version stays.
      const third = await declare(ns, [v2], { build: 'b2' });
      expect((await read()).version).toBe(during.version);
      await ledger.stopWorker(old);
      const after = await read();
      expect(after).toMatchObject({ timeoutMs: 2_000, concurrencyLimit: 5, rateLimit: 100, ratePerMs: 60_000, build: 'b2' });
      expect(after.version).toBeGreaterThan(during.version);
      expect((await beat(newer, ns, [])).policyVersion).toBe(after.version);
      // A definition no live worker runs keeps its last policy.
      await ledger.stopWorker(newer);
      await ledger.stopWorker(third);
      expect(await read()).toMatchObject({ concurrencyLimit: 5, build: 'b2' });
    });

    test('the strictest limit is what the claim applies while builds disagree', async () => {
      const ns = fresh();
      const worker = await declare(ns, [defineJob({ name: 'k', handler, concurrency: { limit: 2 } })], { build: 'b1' });
      await declare(ns, [defineJob({ name: 'k', handler, concurrency: { limit: 4 } })], { build: 'b2' });
      await enqueue(ns, [0, 1, 2, 3, 4].map((i) => ({ definition: 'k', payload: { i }, concurrencyKey: 'key' })));
      expect(iOf((await claim(ns, worker, ['k'], 10)).rows)).toEqual([0, 1]);
      await ledger.stopWorker(worker);
      await h.advance(2_001);
      expect(iOf((await claim(ns, randomUUID(), ['k'], 10)).rows)).toEqual([2, 3]);
    });

    test('builds whose rates differ in limit and window: the smallest limit over the longest window, which neither build\'s window can exceed', async () => {
      const ns = fresh();
      // b1: 3 per second; b2: 10 per 5 s (slower on average, but 10 in one second would break b1's).
      const worker = await declare(ns, [defineJob({ name: 'call', handler, rate: { limit: 3, perMs: 1_000 } })], { build: 'b1' });
      await h.advance(10);
      await declare(ns, [defineJob({ name: 'call', handler, rate: { limit: 10, perMs: 5_000 } })], { build: 'b2' });
      expect((await ledger.loadPolicies(ns, ['call'])).policies[0]).toMatchObject({ rateLimit: 3, ratePerMs: 5_000 });
      await enqueue(ns, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => ({ definition: 'call', payload: { i }, rateKey: 'call' })));
      const { rows } = await claim(ns, worker, ['call'], 10);
      expect(iOf(rows)).toEqual([0, 1, 2]);
      await complete(worker, completion(rows));
      await h.advance(1_001);
      expect(iOf((await claim(ns, worker, ['call'], 10)).rows)).toEqual([]);
    });

    test('fair order turned off by a deploy: the rows that took turns under it (parked, released, handed back) are claimed in plain order', async () => {
      const ns = fresh();
      const fair = await declare(ns, [defineJob({ name: 'f', handler, fair: true, concurrency: { key: (p: { k: string }) => p.k, limit: 1 } })], { build: 'b1' });
      const item = (k: string, i: number): Item => ({ definition: 'f', payload: { k, i }, concurrencyKey: k });
      await enqueue(ns, [item('a', 0), item('a', 1), item('a', 2), item('b', 3), item('b', 4)]);
      const first = await claim(ns, fair, ['f'], 10);
      expect(iOf(first.rows)).toEqual([0, 3]);
      await h.advance(10);
      const plain = await declare(ns, [defineJob({ name: 'f', handler, concurrency: { key: (p: { k: string }) => p.k, limit: 1 } })], { build: 'b2' });
      expect((await ledger.loadPolicies(ns, ['f'])).policies[0]).toMatchObject({ fair: false });
      // b1 ends one attempt and hands the other back as it stops (due now: behind 4, due before).
      const [a0, b3] = byId(first.rows);
      await complete(fair, [...completion([a0]), ...completion([b3], 'handed_back')]);
      await ledger.stopWorker(fair);
      await h.advance(2_001);
      const next = await claim(ns, plain, ['f'], 10);
      expect(iOf(next.rows)).toEqual([1, 4]);
      await complete(plain, completion(next.rows));
      expect(iOf((await claim(ns, plain, ['f'], 10)).rows)).toEqual([2, 3]);
    });

    test('a rate limit raised by a deploy, or dropped, applies to the rows parked under the old one at the next claim, not at the old meter\'s next token', async () => {
      const ns = fresh();
      const old = await declare(ns, [defineJob({ name: 'call', handler, rate: { limit: 2, perMs: 3_600_000 } }), defineJob({ name: 'pull', handler, rate: { limit: 1, perMs: 3_600_000 } })], { build: 'b1' });
      await h.advance(10);
      const worker = await declare(ns, [defineJob({ name: 'call', handler, rate: { limit: 10, perMs: 3_600_000 } }), defineJob({ name: 'pull', handler })], { build: 'b2' });
      const callIds = await ids(ns, [0, 1, 2, 3, 4, 5].map((i) => ({ definition: 'call', payload: { i }, rateKey: 'call' })));
      const pullIds = await ids(ns, [0, 1, 2].map((i) => ({ definition: 'pull', payload: { i }, rateKey: 'pull' })));
      const first = await claim(ns, old, ['call', 'pull'], 10);
      expect(first.rows.map((r) => [r.definition, (r.payload as { i: number }).i])).toEqual([['call', 0], ['call', 1], ['pull', 0]]);
      expect(await parked(ns, callIds)).toEqual([2, 3, 4, 5].map((i) => [i, 'rate']));
      expect(await parked(ns, pullIds)).toEqual([1, 2].map((i) => [i, 'rate']));
      await complete(old, completion(first.rows));
      // b1 gone: 10 an hour for "call" (8 tokens left), no meter for "pull".
      await ledger.stopWorker(old);
      const next = await claim(ns, worker, ['call', 'pull'], 10);
      expect(next.rows.map((r) => [r.definition, (r.payload as { i: number }).i])).toEqual([['call', 2], ['call', 3], ['call', 4], ['call', 5], ['pull', 1], ['pull', 2]]);
    });

    test('a worker silent for deadAfterMs is marked dead by the recovery pass, and its declaration gives way', async () => {
      const ns = fresh();
      await declare(ns, [defineJob({ name: 'sync', handler, concurrency: { limit: 3 } })], { build: 'b1' });
      await h.advance(10);
      const newer = await declare(ns, [defineJob({ name: 'sync', handler, concurrency: { limit: 5 } })], { build: 'b2' });
      const limit = async () => (await ledger.loadPolicies(ns, ['sync'])).policies[0].concurrencyLimit;
      expect(await limit()).toBe(3);
      await h.advance(50_000);
      await beat(newer, ns, []);
      await ledger.recoverJobs({ namespace: ns, deadAfterMs: 60_000 });
      expect(await limit()).toBe(3); // 50 s of silence: alive
      await h.advance(20_000);
      await beat(newer, ns, []);
      const version = (await ledger.loadPolicies(ns, ['sync'])).version;
      await ledger.recoverJobs({ namespace: ns, deadAfterMs: 60_000 });
      expect(await limit()).toBe(5);
      expect((await beat(newer, ns, [])).policyVersion).toBe(version + 1);
    });
  });

  describe('workflows: signals and child jobs', () => workflowCases(() => h));

  describe('schedules', () => scheduleCases(() => h));

  describe('outbox fan-out', () => outboxCases(() => h));
  describe('retention zero', () => retentionZeroCases(() => h));
}
