// Which job runs next (docs/DESIGN.md, "Policies"; migration 0008), where only the SQL can say:
// states reached by setting rows directly, transactions that hold rows or locks. Every rule on the ledger's calls (concurrency keys,
// rate limits, lanes, fair order, policies through deploys) is in the Ledger's contract,
// test/ledger/contract.ts, which test/ledger/sql.test.ts runs on a real server;
// test/faults/policies.test.ts holds them with worker processes, crashes and stalls.
import { randomUUID } from 'node:crypto';
import { createClient, defineJob, type Definition } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs, recoverJobs } from '../../src/db/jobs';
import type { ClaimedRow, CompletionRow } from '../../src/db/types';
import { heartbeat, registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { useTestDatabase, withPgClient } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

const LEASE_MS = 60_000;
let namespaceSeq = 0;

/** A fresh namespace with a worker declaring `definitions`. */
async function declare(namespace: string, definitions: Definition[]): Promise<string> {
  const workerId = randomUUID();
  await registerWorker(db, {
    workerId,
    namespace,
    hostname: 'test',
    pid: 1,
    definitions: definitions.map((d) => d.name),
    maxAttempts: definitions.map((d) => d.maxAttempts ?? null),
    leaseMs: LEASE_MS,
    policies: Object.fromEntries(definitions.map((d) => [d.name, declaredPolicy(d)])),
  });
  return workerId;
}

const handler = () => undefined;
const fresh = () => `policies-${++namespaceSeq}`;
const claim = (namespace: string, worker: string, definitions: string[], limit: number) => claimJobs(db, { namespace, workerId: worker, definitions, limit, leaseMs: LEASE_MS });
const payloadsOf = (rows: ClaimedRow[]) => rows.map((r) => r.payload);
const done = (rows: ClaimedRow[]): CompletionRow[] => rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded', result: null, error: null, retryDelayMs: 0 }));

describe('the ledger', () => {
  test("a claim that waited for its key's lock stamps its attempt when it was admitted: the key's next attempt starts, in the ledger, after the one it followed ended", async () => {
    // docs/DESIGN.md, "The ledger": every guarantee checkable from the database alone. A claim
    // that began before a completion and waited for the key's lock behind it is admitted after
    // that completion; its claimed_at must not be its transaction's start.
    const ns = fresh();
    const worker = await declare(ns, [defineJob({ name: 'solo', handler, concurrency: { limit: 1 } })]);
    const client = createClient({ force: true, db, namespace: ns });
    await client.enqueue('solo', { i: 0 }, { concurrencyKey: 'k' });
    await client.enqueue('solo', { i: 1 }, { concurrencyKey: 'k' });
    const [first] = (await claim(ns, worker, ['solo'], 1)).rows;
    let commitCompletion!: () => void;
    const completionMayCommit = new Promise<void>((resolve) => (commitCompletion = resolve));
    const second = await db.transaction(async (c) => {
      await c.query('select 1'); // the claim's transaction has begun
      await new Promise((r) => setTimeout(r, 5));
      // The first attempt's completion, holding the key's lock until it commits.
      let locked!: () => void;
      const holding = new Promise<void>((resolve) => (locked = resolve));
      const completion = db.transaction(async (t) => {
        const acks = await completeExecutions(t, worker, [{ id: first.id, execution: first.execution, outcome: 'succeeded', result: null, error: null, retryDelayMs: 0 }]);
        expect(acks.map((a) => a.status)).toEqual(['succeeded']);
        locked();
        await completionMayCommit;
      });
      await holding;
      const claiming = claimJobs(c, { namespace: ns, workerId: worker, definitions: ['solo'], limit: 1, leaseMs: LEASE_MS });
      await waitFor(async () => (await db.query<{ n: number }>(`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`)).rows[0].n > 0, 'the claim to wait for the key');
      commitCompletion();
      await completion;
      return (await claiming).rows;
    });
    expect(payloadsOf(second)).toEqual([{ i: 1 }]);
    const { rows } = await db.query<{ gap_ms: number }>(
      `select extract(epoch from j.claimed_at - e.finished_at) * 1000 as gap_ms
         from acta.jobs j, acta.all_executions e where j.id = $1 and e.job_id = $2`, // the first succeeded: its record may be its acta.succeeded_jobs row
      [second[0].id, first.id],
    );
    expect(Number(rows[0].gap_ms)).toBeGreaterThanOrEqual(0);
  });

  test("a meter's start times are its attempts' claimed_at: the ledger's windows are the meter's", async () => {
    const ns = fresh();
    const call = defineJob({ name: 'call', handler, rate: { key: (p: { account: string; i: number }) => p.account, limit: 2, perMs: 60_000 } });
    const worker = await declare(ns, [call]);
    await createClient({ force: true, db, namespace: ns }).enqueueMany(Array.from({ length: 3 }, (_, i) => ({ definition: call, payload: { account: 'a', i } })));
    expect((await claim(ns, worker, ['call'], 10)).rows).toHaveLength(2);
    // One row of the meter's log for the claim: its two starts, at the instant both rows were claimed.
    const { rows } = await db.query<{ upto: string; same: boolean }>(
      `select s.upto, s.at = all (array(select j.claimed_at from acta.jobs j where j.namespace = $1 and j.status = 'executing')) as same
         from acta.meter_starts s where s.namespace = $1`,
      [ns],
    );
    expect(rows).toEqual([{ upto: '2', same: true }]);
    expect((await db.query(`select starts from acta.gates where namespace = $1 and kind = 'rate'`, [ns])).rows).toEqual([{ starts: '2' }]);
  });

  test("a meter's claim costs the same whatever its window holds: 80,000 starts in an hour's window of 1,000,000, against none", async () => {
    const call = defineJob({ name: 'call', handler, rate: { key: (p: { account: string }) => p.account, limit: 1_000_000, perMs: 3_600_000 } });
    const [empty, full, warm] = [fresh(), fresh(), fresh()];
    for (const ns of [empty, full, warm]) {
      await declare(ns, [call]);
      await createClient({ db, namespace: ns }).enqueueMany(Array.from({ length: 2 }, () => ({ definition: call, payload: { account: 'a' } })));
    }
    // The full meter's log as 80,000 claims of one start each left it: the window's rows, and the last before it.
    await db.query(
      `insert into acta.gates (namespace, kind, key, starts) values ($1, 'rate', 'a', 80001);
       insert into acta.meter_starts (namespace, key, upto, at)
       select $1, 'a', i, case when i = 1 then now() - interval '2 hours' else now() - interval '59 minutes' + i * interval '40 milliseconds' end
       from generate_series(1, 80001) as i`.replace(/\$1/g, `'${full}'`),
    );
    await db.query('analyze acta.meter_starts');
    // Shared buffers the claim touched (its statements' included), on one connection, caches warm.
    const blocks = await db.transaction(async (tx) => {
      const claimed = async (ns: string) => {
        const { rows } = await tx.query<{ 'QUERY PLAN': [{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }] }>(
          'explain (analyze, buffers, format json) select * from acta.claim_jobs($1, $2, $3, $4, $5)',
          [ns, randomUUID(), ['call'], 1, LEASE_MS],
        );
        const plan = rows[0]['QUERY PLAN'][0].Plan;
        return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
      };
      await claimed(warm);
      await claimed(warm);
      return { empty: await claimed(empty), full: await claimed(full) };
    });
    // A few more levels of btree in a log of 80,000 rows; the array it replaced (acta.gates.stamps)
    // read and rewrote ~80 blocks per 10,000 starts.
    expect(blocks.full).toBeLessThanOrEqual(blocks.empty + 24);
    // Both claims admitted their row; the full meter kept its log (one row before the window) and added one.
    const { rows } = await db.query<{ namespace: string; starts: string; rows: string; executing: string }>(
      `select g.namespace, g.starts, (select count(*) from acta.meter_starts s where s.namespace = g.namespace) as rows,
              (select count(*) from acta.jobs j where j.namespace = g.namespace and j.status = 'executing') as executing
         from acta.gates g where g.namespace = any ($1) and g.kind = 'rate' order by g.namespace = $2`,
      [[empty, full], full],
    );
    expect(rows).toEqual([
      { namespace: empty, starts: '1', rows: '1', executing: '1' },
      { namespace: full, starts: '80002', rows: '80002', executing: '1' },
    ]);
  });
});

describe('policies through deploys', () => {
  test("a worker marked dead that beats again is alive again with its declaration: its build's stricter limit applies again", async () => {
    const ns = fresh();
    const keyed = (limit: number) => defineJob({ name: 'keyed', handler, concurrency: { key: () => 'k', limit } });
    const register = async (build: string, limit: number) => {
      const workerId = randomUUID();
      await registerWorker(db, { workerId, namespace: ns, hostname: 'test', pid: 1, definitions: ['keyed'], maxAttempts: [null], leaseMs: LEASE_MS, build, policies: { keyed: declaredPolicy(keyed(limit)) } });
      return workerId;
    };
    const strict = await register('b1', 2);
    await register('b2', 4);
    const limit = async () => (await db.query<{ concurrency_limit: number }>(`select concurrency_limit from acta.definitions where namespace = $1 and name = 'keyed'`, [ns])).rows[0].concurrency_limit;
    expect(await limit()).toBe(2);
    // b1's worker falls silent: recovery marks it dead, and its stricter limit gives way.
    await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 hour' where id = $1`, [strict]);
    await recoverJobs(db, { namespace: ns, deadAfterMs: 10 * LEASE_MS });
    expect((await db.query<{ status: string }>('select status from acta.workers where id = $1', [strict])).rows[0].status).toBe('dead');
    expect(await limit()).toBe(4);
    // It was only stalled: its next beat makes it alive, and its limit holds again.
    await heartbeat(db, { workerId: strict, namespace: ns, held: [], leaseMs: LEASE_MS, passes: [] });
    expect((await db.query<{ status: string }>('select status from acta.workers where id = $1', [strict])).rows[0].status).toBe('alive');
    expect(await limit()).toBe(2);
  });
});

describe('lanes', () => {
  const step = defineJob({ name: 'step', handler, lane: (p: { order: string; i: number }) => p.order });
  const laneOf = (ns: string, order: string) =>
    db.query<{ i: number; status: string; blocked_by: string | null }>(`select (payload ->> 'i')::int as i, status, blocked_by from acta.jobs where namespace = $1 and lane = $2 order by id`, [ns, order]);

  test('a row enqueued behind a parked lane while nothing of the lane runs: the claim parks it and releases the head', async () => {
    const ns = fresh();
    const worker = await declare(ns, [step]);
    const client = createClient({ force: true, db, namespace: ns });
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

  test('a claim that gives a burst its turns wakes idle workers when it commits: a concurrent claim skipped the rows it held and found nothing', async () => {
    const ns = fresh();
    const worker = await declare(ns, [report]);
    await createClient({ force: true, db, namespace: ns }).enqueueMany(Array.from({ length: 20 }, (_, i) => ({ definition: report, payload: { tenant: 'big', i } })));
    const woken: string[] = [];
    const unlisten = await db.listen('acta_jobs', { onNotify: (payload) => woken.push(payload) });
    try {
      await db.transaction(async (tx) => {
        expect((await claimJobs(tx, { namespace: ns, workerId: worker, definitions: ['report'], limit: 4, leaseMs: LEASE_MS })).rows).toHaveLength(4);
        // The other 16 rows are locked by the first claim, which tagged them: nothing for this one.
        expect((await claim(ns, randomUUID(), ['report'], 4)).rows).toEqual([]);
      });
      await waitFor(() => woken.includes(ns), 'a wakeup when the claim that tagged the burst committed', 5_000);
      expect((await claim(ns, randomUUID(), ['report'], 4)).rows).toHaveLength(4);
    } finally {
      await unlisten();
    }
  });
});

describe('the ledger', () => {
  test('an attempt is claimed, in the ledger (acta.all_executions), no earlier than the end of the attempt whose slot or lane it took, even when its claim began first', async () => {
    // The claim below begins, picks its rows, then waits for a gate lock held elsewhere; meanwhile
    // a completion that began after it frees a key's slot and a lane, and commits; the claim then
    // admits into both. certify/checker.ts reads a key's holders and a lane's order from these
    // times (docs/certification.md), so the later claim must not be stamped before that end.
    const ns = fresh();
    const solo = defineJob({ name: 'solo', handler, concurrency: { limit: 1 } });
    const step = defineJob({ name: 'step', handler, lane: (p: { order: string; i: number }) => p.order });
    const worker = await declare(ns, [solo, step]);
    const client = createClient({ force: true, db, namespace: ns });
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
        // The ended attempts succeeded: their record may be their acta.succeeded_jobs row.
        `select (extract(epoch from (j.claimed_at - e.finished_at)) * 1000)::float8 as ms from acta.jobs j, acta.all_executions e where j.id = $1 and e.job_id = $2`,
        [taker, ended],
      )).rows[0].ms;
    const [soloRow, stepRow] = [held.rows.find((r) => r.definition === 'solo')!, held.rows.find((r) => r.definition === 'step')!];
    expect(await gap(laned.id, stepRow.id)).toBeGreaterThanOrEqual(0);
    expect(await gap(keyed.id, soloRow.id)).toBeGreaterThanOrEqual(0);
  });
});
