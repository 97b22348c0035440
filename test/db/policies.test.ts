// Which job runs next (docs/DESIGN.md, "Policies"; migration 0008): the claim admits each candidate
// through its lane, concurrency key and rate meter, parks the refused ones in their place, and the
// completion, recovery and cancel calls hand the gates on. Each rule here on the SQL calls the
// worker makes (src/db/*), on a real server; test/faults/policies.test.ts holds them with worker
// processes, crashes and stalls.
import { randomUUID } from 'node:crypto';
import { createClient, defineJob, type Definition } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs, recoverJobs } from '../../src/db/jobs';
import type { ClaimedRow, CompletionRow } from '../../src/db/types';
import { heartbeat, registerWorker, stopWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { useTestDatabase, withPgClient } from '../helpers/db';

const { db, tdb } = useTestDatabase();

const LEASE_MS = 60_000;
let namespaceSeq = 0;

/** A fresh namespace with workers declaring `definitions` (one registration each, `build` optional). */
async function declare(namespace: string, definitions: Definition[], build: string | null = null): Promise<string> {
  const workerId = randomUUID();
  await registerWorker(db, {
    workerId,
    namespace,
    hostname: 'test',
    pid: 1,
    definitions: definitions.map((d) => d.name),
    maxAttempts: definitions.map((d) => d.maxAttempts ?? null),
    leaseMs: LEASE_MS,
    build,
    policies: Object.fromEntries(definitions.map((d) => [d.name, declaredPolicy(d)])),
  });
  return workerId;
}

const handler = () => undefined;
const fresh = () => `policies-${++namespaceSeq}`;
const claim = (namespace: string, worker: string, definitions: string[], limit: number, leaseMs = LEASE_MS) => claimJobs(db, { namespace, workerId: worker, definitions, limit, leaseMs });
const done = (rows: ClaimedRow[], outcome: CompletionRow['outcome'] = 'succeeded', retryDelayMs = 0): CompletionRow[] =>
  rows.map((r) => ({ id: r.id, execution: r.execution, outcome, result: null, error: outcome.startsWith('failed') ? JSON.stringify({ name: 'Error', message: 'x' }) : null, retryDelayMs }));
const payloadsOf = (rows: ClaimedRow[]) => rows.map((r) => r.payload);
const parked = async (namespace: string) =>
  (await db.query<{ i: number; blocked_by: string }>(`select (payload ->> 'i')::int as i, blocked_by from acta.jobs where namespace = $1 and blocked_by is not null order by id`, [namespace])).rows;

describe('concurrency keys', () => {
  const rebuild = defineJob({ name: 'rebuild', handler, concurrency: { key: (p: { tenant: string; i: number }) => `tenant:${p.tenant}`, limit: 3 } });

  test('a batch claim never starts more attempts of a key than its free slots; the refused rows wait parked, uncharged, and the claimer sleeps until the bounce', async () => {
    const ns = fresh();
    const worker = await declare(ns, [rebuild]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ definition: rebuild, payload: { tenant: 'acme', i } })));
    await client.enqueue(rebuild, { tenant: 'other', i: 100 });
    const first = await claim(ns, worker, ['rebuild'], 100);
    expect(payloadsOf(first.rows)).toEqual([0, 1, 2, 100].map((i) => ({ tenant: i === 100 ? 'other' : 'acme', i })));
    expect((await parked(ns)).map((r) => [r.i, r.blocked_by])).toEqual([3, 4, 5, 6, 7, 8, 9].map((i) => [i, 'concurrency']));
    const { rows: charged } = await db.query<{ n: string }>(`select count(*) as n from acta.jobs where namespace = $1 and attempts > 0`, [ns]);
    expect(Number(charged[0].n)).toBe(0);
    // Nothing more for the key: an idle answer whose next due time is the gate's recheck, the bounce.
    const idle = await claim(ns, worker, ['rebuild'], 100);
    expect(idle.rows).toEqual([]);
    expect(idle.nextDueInMs).toBeGreaterThan(1_500);
    expect(idle.nextDueInMs).toBeLessThanOrEqual(2_000);
  });

  test('a completion hands its slot to the first parked row of the key, in order, in the same call; a new row of the key does not pass a parked one', async () => {
    const ns = fresh();
    const worker = await declare(ns, [rebuild]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ definition: rebuild, payload: { tenant: 'acme', i } })));
    const first = await claim(ns, worker, ['rebuild'], 10);
    expect(first.rows).toHaveLength(3);
    await client.enqueue(rebuild, { tenant: 'acme', i: 99 }); // after the parked ones
    const acks = await completeExecutions(db, worker, done(first.rows.slice(0, 1)));
    expect(acks.map((a) => a.status)).toEqual(['succeeded']);
    expect((await parked(ns)).map((r) => r.i)).toEqual([4, 5]); // 3 was released
    const next = await claim(ns, worker, ['rebuild'], 10);
    expect(payloadsOf(next.rows)).toEqual([{ tenant: 'acme', i: 3 }]);
    // The new row met a full key with parked rows before it: parked behind them.
    expect((await parked(ns)).map((r) => r.i)).toEqual([4, 5, 99]);
    // Every way an attempt ends frees its slot: a retry, a hand-back.
    await completeExecutions(db, worker, [...done(first.rows.slice(1, 2), 'failed', 60_000), ...done(first.rows.slice(2, 3), 'handed_back')]);
    const after = await claim(ns, worker, ['rebuild'], 10);
    // The handed-back row is Ready at once and due first (claim order: its due time is now, after the parked rows' own).
    expect(after.rows).toHaveLength(2);
    expect((await db.query(`select count(*)::int as n from acta.jobs where namespace = $1 and status = 'executing'`, [ns])).rows[0].n).toBe(3);
  });

  test('one key across definitions shares its slots; each definition admits up to its own limit', async () => {
    const ns = fresh();
    const one = defineJob({ name: 'one', handler, concurrency: { limit: 1 } });
    const two = defineJob({ name: 'two', handler, concurrency: { limit: 2 } });
    const worker = await declare(ns, [one, two]);
    const client = createClient({ db, namespace: ns, definitions: [one, two] });
    await client.enqueue('two', { i: 0 }, { concurrencyKey: 'shared' });
    await client.enqueue('one', { i: 1 }, { concurrencyKey: 'shared' });
    await client.enqueue('two', { i: 2 }, { concurrencyKey: 'shared' });
    const got = await claim(ns, worker, ['one', 'two'], 10);
    // 'two' takes a slot (1 held < 2); 'one' then sees 1 held = its limit 1: parked; the second
    // 'two' sees 1 held < 2, but a parked row of the key comes before it: parked behind it.
    expect(payloadsOf(got.rows)).toEqual([{ i: 0 }]);
    expect((await parked(ns)).map((r) => r.i)).toEqual([1, 2]);
  });

  test('a slot is held until the attempt ends or recovery returns its row: an expired lease not yet recovered still holds it; recovery hands it on', async () => {
    const ns = fresh();
    const worker = await declare(ns, [defineJob({ name: 'solo', handler, concurrency: { limit: 1 } })]);
    const client = createClient({ db, namespace: ns });
    await client.enqueue('solo', { i: 0 }, { concurrencyKey: 'k' });
    await client.enqueue('solo', { i: 1 }, { concurrencyKey: 'k' });
    const held = await claim(ns, worker, ['solo'], 10, 1); // a lease of 1 ms: expired at once
    expect(payloadsOf(held.rows)).toEqual([{ i: 0 }]);
    await new Promise((r) => setTimeout(r, 5));
    // Another worker, right after the lease ran out, before any recovery pass: still refused.
    const other = randomUUID();
    expect((await claim(ns, other, ['solo'], 10)).rows).toEqual([]);
    // The stalled holder wakes up: its heartbeat still renews (nobody took its slot or its row).
    const beat = await heartbeat(db, { workerId: worker, namespace: ns, held: held.rows.map((r) => ({ id: r.id, execution: r.execution, started: true })), leaseMs: 1 });
    expect(beat.renewed).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 5));
    const recovered = await recoverJobs(db, { namespace: ns, deadAfterMs: 600_000 });
    expect(recovered.map((r) => r.status)).toEqual(['ready']);
    // The slot is free: the parked row was released by the recovery pass, in the same call.
    expect(await parked(ns)).toEqual([]);
    const next = await claim(ns, other, ['solo'], 10);
    expect(next.rows).toHaveLength(1);
    // The woken holder's completion is fenced out: the slot is not its own any more.
    expect((await completeExecutions(db, worker, done(held.rows))).map((a) => a.status)).toEqual(['stale']);
    expect((await claim(ns, randomUUID(), ['solo'], 10)).rows).toEqual([]);
  });

  test('a gate whose recheck has come releases what it has room for: a limit raised by a new declaration lets parked rows run', async () => {
    const ns = fresh();
    const worker = await declare(ns, [defineJob({ name: 'grow', handler, concurrency: { limit: 1 } })]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ definition: 'grow', payload: { i }, concurrencyKey: 'k' })));
    expect((await claim(ns, worker, ['grow'], 10)).rows).toHaveLength(1);
    expect(await parked(ns)).toHaveLength(3);
    // The only live worker stops; a new build declares 3.
    await stopWorker(db, worker);
    const next = await declare(ns, [defineJob({ name: 'grow', handler, concurrency: { limit: 3 } })], 'b2');
    expect((await claim(ns, next, ['grow'], 10)).rows).toEqual([]); // the recheck has not come
    await db.query(`update acta.gates set recheck_at = now() - interval '1 ms' where namespace = $1`, [ns]);
    expect(payloadsOf((await claim(ns, next, ['grow'], 10)).rows)).toEqual([{ i: 1 }, { i: 2 }]);
    expect((await parked(ns)).map((r) => r.i)).toEqual([3]);
  });
});

describe('rate limits', () => {
  const call = defineJob({ name: 'call', handler, rate: { key: (p: { account: string; i: number }) => p.account, limit: 2, perMs: 60_000 } });

  test('a meter admits `limit` starts per window across claims; the refused wait parked for the next free token; a shifted window frees tokens in order', async () => {
    const ns = fresh();
    const worker = await declare(ns, [call]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ definition: call, payload: { account: 'a', i } })));
    const first = await claim(ns, worker, ['call'], 10);
    expect(first.rows.map((r) => (r.payload as { i: number }).i)).toEqual([0, 1]);
    expect((await parked(ns)).map((r) => [r.i, r.blocked_by])).toEqual([2, 3, 4].map((i) => [i, 'rate']));
    // Completing them frees no token: the window counts starts.
    await completeExecutions(db, worker, done(first.rows));
    const idle = await claim(ns, randomUUID(), ['call'], 10);
    expect(idle.rows).toEqual([]);
    // Next free token: when the first start leaves the 60 s window.
    expect(idle.nextDueInMs).toBeGreaterThan(58_000);
    expect(idle.nextDueInMs).toBeLessThanOrEqual(60_000);
    // 61 s later (the log and the recheck shifted back): two more, in order.
    await db.query(`update acta.gates set stamps = array(select s - interval '61 s' from unnest(stamps) s), recheck_at = recheck_at - interval '61 s' where namespace = $1`, [ns]);
    const later = await claim(ns, worker, ['call'], 10);
    expect(later.rows.map((r) => (r.payload as { i: number }).i)).toEqual([2, 3]);
  });

  test('a rate-limited attempt ends uncharged, is due after its delay, and holds the meter shut for everyone until then', async () => {
    const ns = fresh();
    const worker = await declare(ns, [call]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 2 }, (_, i) => ({ definition: call, payload: { account: 'a', i } })));
    await client.enqueue(call, { account: 'b', i: 9 });
    const [row] = (await claim(ns, worker, ['call'], 1)).rows;
    const acks = await completeExecutions(db, worker, done([row], 'rate_limited', 30_000));
    expect(acks.map((a) => a.status)).toEqual(['ready']);
    const { rows } = await db.query<{ attempts: number; due_in_s: number; outcome: string; charged: boolean }>(
      `select j.attempts, round(extract(epoch from j.run_at - now()))::int as due_in_s, e.outcome, e.charged
         from acta.jobs j join acta.executions e on e.job_id = j.id where j.id = $1`,
      [row.id],
    );
    expect(rows).toEqual([{ attempts: 0, due_in_s: 30, outcome: 'rate_limited', charged: false }]);
    // The other row of meter 'a' is refused (parked until the meter opens); meter 'b' is not shut.
    const next = await claim(ns, randomUUID(), ['call'], 10);
    expect(payloadsOf(next.rows)).toEqual([{ account: 'b', i: 9 }]);
    expect((await parked(ns)).map((r) => [r.i, r.blocked_by])).toEqual([[1, 'rate']]);
    const idle = await claim(ns, randomUUID(), ['call'], 10);
    expect(idle.nextDueInMs).toBeGreaterThan(28_000);
  });
});

describe('lanes', () => {
  const step = defineJob({ name: 'step', handler, lane: (p: { order: string; i: number }) => p.order });
  const laneOf = (ns: string, order: string) =>
    db.query<{ i: number; status: string; blocked_by: string | null }>(`select (payload ->> 'i')::int as i, status, blocked_by from acta.jobs where namespace = $1 and lane = $2 order by id`, [ns, order]);

  test('only the head of a lane is claimable; its completion hands on to the next in the same call; lanes do not wait for each other', async () => {
    const ns = fresh();
    const worker = await declare(ns, [step]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany([0, 1, 2].map((i) => ({ definition: step, payload: { order: 'o1', i } })));
    await client.enqueue(step, { order: 'o2', i: 10 });
    const first = await claim(ns, worker, ['step'], 10);
    expect(payloadsOf(first.rows)).toEqual([{ order: 'o1', i: 0 }, { order: 'o2', i: 10 }]);
    expect((await laneOf(ns, 'o1')).rows.map((r) => r.blocked_by)).toEqual([null, 'lane', 'lane']);
    await completeExecutions(db, worker, done(first.rows.slice(0, 1)));
    expect((await laneOf(ns, 'o1')).rows.map((r) => [r.status, r.blocked_by])).toEqual([['succeeded', null], ['ready', null], ['ready', 'lane']]);
    expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o1', i: 1 }]);
  });

  test('a retrying head keeps its lane waiting; a head that fails for good hands on; a cancelled head hands on', async () => {
    const ns = fresh();
    const worker = await declare(ns, [step]);
    const client = createClient({ db, namespace: ns });
    const ids = await client.enqueueMany([0, 1, 2, 3].map((i) => ({ definition: step, payload: { order: 'o', i } })));
    const [head] = (await claim(ns, worker, ['step'], 10)).rows;
    await completeExecutions(db, worker, done([head], 'failed', 1)); // due again in 1 ms
    await new Promise((r) => setTimeout(r, 5));
    // The retry is due: it is claimed again, not the row behind it.
    const again = await claim(ns, worker, ['step'], 10);
    expect(payloadsOf(again.rows)).toEqual([{ order: 'o', i: 0 }]);
    await completeExecutions(db, worker, done(again.rows, 'failed_final'));
    const second = await claim(ns, worker, ['step'], 10);
    expect(payloadsOf(second.rows)).toEqual([{ order: 'o', i: 1 }]);
    await completeExecutions(db, worker, done(second.rows, 'failed', 60_000)); // a retry due in a minute
    expect((await claim(ns, worker, ['step'], 10)).rows).toEqual([]); // the lane waits for it
    expect(await client.cancel(ids[1].id)).toBe(true); // the waiting head, cancelled
    expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 2 }]);
  });

  test('a crash never strands a lane: recovery returns the head, which is still the head; a head whose attempts run out in recovery hands on', async () => {
    const ns = fresh();
    const worker = await declare(ns, [defineJob({ name: 'step', handler, lane: step.lane, maxAttempts: 1 })]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany([0, 1].map((i) => ({ definition: step, payload: { order: 'o', i } })));
    const [head] = (await claim(ns, worker, ['step'], 10, 1)).rows;
    await new Promise((r) => setTimeout(r, 5));
    expect((await recoverJobs(db, { namespace: ns, deadAfterMs: 600_000 })).map((r) => r.status)).toEqual(['ready']);
    const again = await claim(ns, worker, ['step'], 10, 1);
    expect(again.rows.map((r) => r.id)).toEqual([head.id]);
    // Started this time (a beat reported it): charged, its one attempt used: Failed, and the lane moves on.
    await heartbeat(db, { workerId: worker, namespace: ns, held: again.rows.map((r) => ({ id: r.id, execution: r.execution, started: true })), leaseMs: 1 });
    await new Promise((r) => setTimeout(r, 5));
    expect((await recoverJobs(db, { namespace: ns, deadAfterMs: 600_000 })).map((r) => r.status)).toEqual(['failed']);
    expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 1 }]);
  });

  test('a row enqueued behind a parked lane while nothing of the lane runs: the claim parks it and releases the head', async () => {
    const ns = fresh();
    const worker = await declare(ns, [step]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany([0, 1].map((i) => ({ definition: step, payload: { order: 'o', i } })));
    // As if the head's hand-on had not happened yet: both rows parked, nothing running.
    await db.query(`update acta.jobs set blocked_by = 'lane' where namespace = $1`, [ns]);
    await client.enqueue(step, { order: 'o', i: 2 });
    expect((await claim(ns, worker, ['step'], 10)).rows).toEqual([]);
    expect((await laneOf(ns, 'o')).rows.map((r) => r.blocked_by)).toEqual([null, 'lane', 'lane']);
    expect(payloadsOf((await claim(ns, worker, ['step'], 10)).rows)).toEqual([{ order: 'o', i: 0 }]);
  });
});

describe('fair order', () => {
  const report = defineJob({ name: 'report', handler, fair: true, concurrency: { key: (p: { tenant: string; i: number }) => p.tenant } });

  test("a tenant's burst does not hold another tenant's lone job back more than one claim; a tenant alone takes every row asked for", async () => {
    const ns = fresh();
    const worker = await declare(ns, [report]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 1_000 }, (_, i) => ({ definition: report, payload: { tenant: 'big', i } })));
    const alone = await claim(ns, worker, ['report'], 8);
    expect(alone.rows).toHaveLength(8);
    await client.enqueue(report, { tenant: 'small', i: 0 });
    const next = await claim(ns, worker, ['report'], 4);
    expect(payloadsOf(next.rows)).toContainEqual({ tenant: 'small', i: 0 });
    // Turns alternate while both have rows: a second small tenant job and the big backlog.
    await client.enqueueMany([1, 2].map((i) => ({ definition: report, payload: { tenant: 'small', i } })));
    const turns = await claim(ns, worker, ['report'], 4);
    expect(turns.rows.map((r) => (r.payload as { tenant: string }).tenant).sort()).toEqual(['big', 'big', 'small', 'small']);
  });

  test('a retried row gives up its turn and takes a new one when due', async () => {
    const ns = fresh();
    const worker = await declare(ns, [report]);
    const client = createClient({ db, namespace: ns });
    await client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ definition: report, payload: { tenant: 't', i } })));
    const [first] = (await claim(ns, worker, ['report'], 1)).rows;
    await completeExecutions(db, worker, done([first], 'failed', 1));
    const { rows } = await db.query<{ tag: string | null }>(`select fair_tag as tag from acta.jobs where id = $1`, [first.id]);
    expect(rows[0].tag).toBeNull();
    await new Promise((r) => setTimeout(r, 5));
    // Due again: tagged after its tenant's rows waiting, so they go first.
    expect(payloadsOf((await claim(ns, worker, ['report'], 3)).rows)).toEqual([1, 2, 0].map((i) => ({ tenant: 't', i })));
  });
});

describe('the ledger', () => {
  test('an attempt is claimed, in acta.executions, no earlier than the end of the attempt whose slot or lane it took, even when its claim began first', async () => {
    // The claim below begins, picks its rows, then waits for a gate lock held elsewhere; meanwhile
    // a completion that began after it frees a key's slot and a lane, and commits; the claim then
    // admits into both. certify/checker.ts reads a key's holders and a lane's order from these
    // times (docs/certification.md), so the later claim must not be stamped before that end.
    const ns = fresh();
    const solo = defineJob({ name: 'solo', handler, concurrency: { limit: 1 } });
    const step = defineJob({ name: 'step', handler, lane: (p: { order: string; i: number }) => p.order });
    const worker = await declare(ns, [solo, step]);
    const client = createClient({ db, namespace: ns });
    const lock = async (kind: string, key: string) => BigInt((await db.query<{ l: string }>('select acta.gate_lock($1, $2, $3)::text as l', [ns, kind, key])).rows[0].l);
    // A free key whose gate lock comes before the busy key's and the lane's: the claim waits for it first.
    const below = [await lock('concurrency', 'busy'), await lock('lane', 'o')].reduce((a, b) => (a < b ? a : b));
    let free = '';
    for (let i = 0; !free; i++) if ((await lock('concurrency', `free-${i}`)) < below) free = `free-${i}`;
    await client.enqueue(solo, { i: 0 }, { concurrencyKey: 'busy' });
    await client.enqueue(step, { order: 'o', i: 1 });
    const held = await claim(ns, worker, ['solo', 'step'], 10);
    expect(held.rows).toHaveLength(2);
    const keyed = await client.enqueue(solo, { i: 2 }, { concurrencyKey: 'busy' });
    const laned = await client.enqueue(step, { order: 'o', i: 3 });
    const other = await client.enqueue(solo, { i: 4 }, { concurrencyKey: free });
    await withPgClient(tdb.url, async (session) => {
      await session.query('begin');
      await session.query('select pg_advisory_xact_lock(acta.gate_lock($1, $2, $3))', [ns, 'concurrency', free]);
      const claiming = claim(ns, randomUUID(), ['solo', 'step'], 10);
      while ((await db.query<{ n: number }>(`select count(*)::int as n from pg_locks l join pg_database d on d.oid = l.database where d.datname = current_database() and l.locktype = 'advisory' and not l.granted`)).rows[0].n === 0) {
        await new Promise((r) => setTimeout(r, 5));
      }
      await completeExecutions(db, worker, done(held.rows));
      await session.query('commit');
      expect((await claiming).rows.map((r) => r.id).sort()).toEqual([keyed.id, laned.id, other.id].sort());
    });
    const gap = async (taker: string, ended: string) =>
      (await db.query<{ ms: number }>(
        `select (extract(epoch from (j.claimed_at - e.finished_at)) * 1000)::float8 as ms from acta.jobs j, acta.executions e where j.id = $1 and e.job_id = $2`,
        [taker, ended],
      )).rows[0].ms;
    const [soloRow, stepRow] = [held.rows.find((r) => r.definition === 'solo')!, held.rows.find((r) => r.definition === 'step')!];
    expect(await gap(laned.id, stepRow.id)).toBeGreaterThanOrEqual(0);
    expect(await gap(keyed.id, soloRow.id)).toBeGreaterThanOrEqual(0);
  });
});

describe('policies through deploys', () => {
  test('while live builds disagree the strictest limit applies, the newest declaration for the rest; the version moves and the heartbeat reports it', async () => {
    const ns = fresh();
    const v1 = defineJob({ name: 'sync', handler, timeoutMs: 1_000, concurrency: { limit: 3 }, rate: { limit: 10, perMs: 1_000 } });
    const v2 = defineJob({ name: 'sync', handler, timeoutMs: 2_000, concurrency: { limit: 5 }, rate: { limit: 100, perMs: 60_000 } });
    const read = async () =>
      (await db.query<{ timeout_ms: number; concurrency_limit: number; rate_limit: number; rate_per_ms: number; build: string; version: number }>(`select d.timeout_ms, d.concurrency_limit, d.rate_limit, d.rate_per_ms, d.build, n.policy_version::int as version
                         from acta.definitions d join acta.namespaces n on n.name = d.namespace where d.namespace = $1`, [ns])).rows[0];
    const old = await declare(ns, [v1], 'b1');
    const first = await read();
    expect(first).toMatchObject({ timeout_ms: 1_000, concurrency_limit: 3, rate_limit: 10, rate_per_ms: 1_000, build: 'b1' });
    const newer = await declare(ns, [v2], 'b2');
    // b2 is the newest: its timeout; the limits are the strictest of the two (3; 100 per minute is slower than 10 per second).
    const during = await read();
    expect(during).toMatchObject({ timeout_ms: 2_000, concurrency_limit: 3, rate_limit: 100, rate_per_ms: 60_000, build: 'b2' });
    expect(during.version).toBeGreaterThan(first.version);
    await stopWorker(db, old);
    const after = await read();
    expect(after).toMatchObject({ timeout_ms: 2_000, concurrency_limit: 5, build: 'b2' });
    const beat = await heartbeat(db, { workerId: newer, namespace: ns, held: [], leaseMs: LEASE_MS });
    expect(beat.policyVersion).toBe(after.version);
  });
});
