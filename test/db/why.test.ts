// client.why (src/ops/why.ts): each cause built for real on a database, through the calls a worker
// makes (register, claim, complete), and named with its blocker.
import { randomUUID } from 'node:crypto';
import { createClient, type Client, type Definition, defineJob } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs } from '../../src/db/jobs';
import { registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();
let client: Client;
beforeEach(async () => {
  await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.workers, acta.pauses, acta.gates, acta.definitions');
  client = createClient({ force: true, db });
});

const handler = async () => null;
const plain = defineJob({ name: 'plain', handler });
const keyed = defineJob({ name: 'keyed', handler, concurrency: { key: () => 'k', limit: 1 } });
const metered = defineJob({ name: 'metered', handler, rate: { key: () => 'm', limit: 1, perMs: 60_000 } });
const laned = defineJob({ name: 'laned', handler, lane: () => 'L' });

async function worker(definitions: Definition[], build: string | null = null): Promise<string> {
  const workerId = randomUUID();
  await registerWorker(db, {
    workerId,
    namespace: 'default',
    hostname: 'why-test',
    pid: 42,
    definitions: definitions.map((d) => d.name),
    maxAttempts: definitions.map((d) => d.maxAttempts ?? null),
    leaseMs: 60_000,
    build,
    policies: Object.fromEntries(definitions.map((d) => [d.name, declaredPolicy(d)])),
  });
  return workerId;
}
const claim = (workerId: string, definition: string, limit = 10) => claimJobs(db, { namespace: 'default', workerId, definitions: [definition], limit, leaseMs: 60_000 });
const causes = async (id: string) => (await client.why(id))?.reasons.map((r) => r.cause);
const reason = async (id: string) => (await client.why(id))!.reasons[0];

test('claimable: due, nothing holding it, a live worker declares it', async () => {
  await worker([plain]);
  const { id } = await client.enqueue(plain, {});
  expect(await reason(id)).toMatchObject({ cause: 'claimable' });
});

test('claimable: the jobs ahead of it are counted in claim order, higher priority first (then due time, then id)', async () => {
  await worker([plain]);
  for (let i = 0; i < 3; i++) await client.enqueue(plain, {});
  const high = (await client.enqueue(plain, {}, { priority: 10 })).id;
  const low = (await client.enqueue(plain, {}, { priority: -5, runAt: new Date(Date.now() - 60_000) })).id;
  const middle = (await client.enqueue(plain, {})).id;
  expect((await reason(high)).message).toContain('(0 due jobs of "plain" ahead of it)');
  expect((await reason(middle)).message).toContain('(4 due jobs of "plain" ahead of it)');
  expect((await reason(low)).message).toContain('(5 due jobs of "plain" ahead of it)');
});

test('claimable, fair order: the jobs ahead of it are those whose turns come first (priority, then turn), which a claim gave them', async () => {
  const fair = defineJob({ name: 'fair', handler, fair: true, concurrency: { key: (p: { t: string }) => p.t } });
  const workerId = await worker([fair]);
  const a = [];
  for (let i = 0; i < 4; i++) a.push((await client.enqueue(fair, { t: 'a' })).id);
  const b = (await client.enqueue(fair, { t: 'b' })).id;
  // One claim of one row gives every due row its turn: a0 runs; b's turn is second, then a1..a3.
  expect((await claim(workerId, 'fair', 1)).rows.map((r) => r.id)).toEqual([a[0]]);
  expect((await reason(b)).message).toContain('(0 due jobs of "fair" ahead of it)');
  expect((await reason(a[1])).message).toContain('(1 due jobs of "fair" ahead of it)');
  expect((await reason(a[3])).message).toContain('(3 due jobs of "fair" ahead of it)');
});

test('not due until T', async () => {
  await worker([plain]);
  const runAt = new Date(Date.now() + 3_600_000);
  const { id } = await client.enqueue(plain, {}, { runAt });
  const r = await reason(id);
  expect(r).toMatchObject({ cause: 'not-due', until: runAt });
  expect(r.message).toContain(runAt.toISOString());
});

test('namespace paused, then definition paused: by whom, since when, why', async () => {
  await worker([plain]);
  const { id } = await client.enqueue(plain, {});
  const p = await client.pause({ by: 'alice', reason: 'incident 12' });
  expect(await reason(id)).toMatchObject({ cause: 'paused', pause: { namespace: 'default', definition: null, pausedBy: 'alice', reason: 'incident 12', pausedAt: p.pausedAt } });
  await client.resume();
  await client.pause({ definition: 'plain', by: 'bob' });
  expect(await reason(id)).toMatchObject({ cause: 'paused', pause: { definition: 'plain', pausedBy: 'bob' } });
});

test('concurrency key full: held by the jobs that run under it', async () => {
  const w = await worker([keyed]);
  const [a, b] = await client.enqueueMany([{ definition: keyed, payload: {} }, { definition: keyed, payload: {} }]);
  expect((await claim(w, 'keyed')).rows.map((r) => r.id)).toEqual([a.id]);
  const r = await reason(b.id);
  expect(r).toMatchObject({ cause: 'concurrency', blockers: [a.id] });
  expect(r.message).toMatch(new RegExp(`1 of 1 slots held by job ${a.id}$`));
});

test('concurrency key full with many holders: named in the plural, the first 20 and an ellipsis for the rest', async () => {
  const wide = defineJob({ name: 'wide', handler, concurrency: { key: () => 'k', limit: 21 } });
  const w = await worker([wide]);
  const jobs = await client.enqueueMany(Array.from({ length: 22 }, () => ({ definition: wide, payload: {} })));
  const holders = (await claim(w, 'wide', 22)).rows.map((r) => r.id).sort((x, y) => Number(x) - Number(y));
  expect(holders).toHaveLength(21);
  const waiting = jobs.find((j) => !holders.includes(j.id))!.id;
  const r = await reason(waiting);
  expect(r).toMatchObject({ cause: 'concurrency', blockers: holders.slice(0, 20) });
  expect(r.message).toMatch(new RegExp(`21 of 21 slots held by jobs ${holders.slice(0, 20).join(', ')}, …$`));
});

test('rate meter shut until T', async () => {
  const w = await worker([metered]);
  const [, b] = await client.enqueueMany([{ definition: metered, payload: {} }, { definition: metered, payload: {} }]);
  await claim(w, 'metered');
  const r = await reason(b.id);
  expect(r.cause).toBe('rate');
  expect(r.until!.getTime()).toBeGreaterThan(Date.now() + 50_000); // the token frees a window after the first start
});

test('lane: a head not due yet is named with its due time, when the lane moves on (a schedule\'s armed fire, a delayed job)', async () => {
  await worker([laned]);
  const runAt = new Date(Date.now() + 3_600_000);
  const head = (await client.enqueue(laned, {}, { runAt })).id;
  const { id } = await client.enqueue(laned, {});
  const r = await reason(id);
  expect(r).toMatchObject({ cause: 'lane', blockers: [head], until: runAt });
  expect(r.message).toBe(`lane "L": its head is job ${head} (ready, not due until ${runAt.toISOString()})`);
});

test("lane: its head is job Z", async () => {
  const w = await worker([laned]);
  const [a, b] = await client.enqueueMany([{ definition: laned, payload: {} }, { definition: laned, payload: {} }]);
  await claim(w, 'laned');
  expect(await reason(b.id)).toMatchObject({ cause: 'lane', blockers: [a.id] });
});

test('no live worker handles the definition: none at all, or only builds that lack it', async () => {
  const { id } = await client.enqueue('plain', {});
  expect(await reason(id)).toMatchObject({ cause: 'no-worker', message: 'no live worker in namespace "default"' });
  await worker([keyed], 'v7');
  const r = await reason(id);
  expect(r.cause).toBe('no-worker');
  expect(r.message).toContain('build v7');
  await worker([keyed]); // a worker without --build is named so, not "build (no build)"
  expect((await reason(id)).message).toBe('no live worker handles definition "plain": the live ones (build v7, no build) lack it');
});

test('running on worker W; leased by a dead worker until T', async () => {
  const w = await worker([plain]);
  const { id } = await client.enqueue(plain, {});
  await claim(w, 'plain');
  expect(await reason(id)).toMatchObject({ cause: 'running', worker: w });
  await db.query(`update acta.workers set status = 'dead' where id = $1`, [w]);
  const r = await reason(id);
  expect(r).toMatchObject({ cause: 'dead-worker', worker: w });
  expect(r.message).toContain('dead');
});

test('workers that stopped beating (every one crashed, none left to mark them dead) are not live: no-worker, not claimable; their leases wait for a worker to start', async () => {
  const w = await worker([plain]); // lease 60 s: H = 15 s, gone after 7 H = 105 s of silence
  const running = (await client.enqueue(plain, {})).id;
  await claim(w, 'plain');
  const waiting = (await client.enqueue(plain, {})).id;
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '100 seconds' where id = $1`, [w]);
  expect(await reason(waiting)).toMatchObject({ cause: 'claimable' }); // within 7 H: live
  expect(await reason(running)).toMatchObject({ cause: 'running', worker: w });
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '110 seconds', status = 'alive' where id = $1`, [w]);
  const idle = await reason(waiting);
  expect(idle).toMatchObject({ cause: 'no-worker' });
  expect(idle.message).toContain('no live worker in namespace "default" (1 worker declaring it listed alive but silent past 7 heartbeats');
  const held = await reason(running);
  expect(held).toMatchObject({ cause: 'dead-worker', worker: w });
  expect(held.message).toContain('silent past 7 heartbeats');
  expect(held.message).toContain('no live worker is left in namespace "default" to run the recovery pass: it returns once a worker starts there');
});

test('a worker of the previous revision registers without its lease (a rolling upgrade) and counts as live however long it is silent', async () => {
  const old = '00000000-0000-4000-8000-0000000000aa';
  await db.query(`select acta.register_worker($1, 'default', 'old-host', 1, array['plain'], array[null::integer], array['recovery'], array[60000], null, null)`, [old]);
  expect((await db.query<{ lease_ms: number | null }>('select lease_ms from acta.workers where id = $1', [old])).rows).toEqual([{ lease_ms: null }]);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 day' where id <> $1`, [old]);
  const waiting = (await client.enqueue(plain, {})).id;
  expect(await reason(waiting)).toMatchObject({ cause: 'claimable' });
});

test('attempts used up; ended', async () => {
  const w = await worker([plain]);
  const [a, b] = await client.enqueueMany([{ definition: plain, payload: {}, maxAttempts: 1 }, { definition: plain, payload: {} }]);
  const { rows } = await claim(w, 'plain');
  await completeExecutions(db, w, [
    { id: a.id, execution: rows[0].execution, outcome: 'failed', result: null, error: JSON.stringify({ name: 'Error', message: 'nope' }), retryDelayMs: 0 },
    { id: b.id, execution: rows[1].execution, outcome: 'succeeded', result: '1', error: null, retryDelayMs: 0 },
  ]);
  const r = await reason(a.id);
  expect(r).toMatchObject({ cause: 'attempts-used-up' });
  expect(r.message).toContain('1 of 1');
  expect(r.message).toContain('nope');
  expect(await causes(b.id)).toEqual(['ended']);
  expect(await client.why('999999')).toBeNull();
  await expect(client.why('x')).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
});

test('waiting for a signal names the signal and its timeout; waiting for child jobs names the children not ended', async () => {
  const { createWorker } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const { waitFor } = await import('../helpers/wait');
  const approval = defineJob({ name: 'approval', handler: async (_p: unknown, ctx) => ctx.waitForSignal('approved', { timeoutMs: 3_600_000 }) });
  const parent = defineJob({
    name: 'parent',
    handler: async (_p: unknown, ctx) => {
      // force: no worker declares 'plain' here, and children that never run are what this test waits on.
      await ctx.spawnMany([{ definition: 'plain', payload: 1, force: true }, { definition: 'plain', payload: 2, force: true }]);
      return ctx.waitForChildren();
    },
  });
  const w = createWorker({ db, definitions: [approval, parent], logger: silentLogger, heartbeatIntervalMs: 1_000 });
  await w.start();
  try {
    const { id: a } = await client.enqueue(approval, null);
    const { id: p } = await client.enqueue(parent, null);
    await waitFor(async () => (await client.getJob(a))?.status === 'waiting' && (await client.getJob(p))?.status === 'waiting', 'both jobs waiting');
    const signal = (await client.why(a))!.reasons;
    expect(signal).toEqual([expect.objectContaining({ cause: 'signal', message: expect.stringContaining('waiting for signal "approved", until ') })]);
    expect(signal[0].until).toBeInstanceOf(Date);
    const children = (await client.why(p))!.reasons;
    const { rows } = await db.query<{ id: string }>('select id::text as id from acta.jobs where parent_id = $1 order by id', [p]);
    expect(children).toEqual([expect.objectContaining({ cause: 'children', blockers: rows.map((r) => r.id), message: expect.stringContaining('waiting for 2 child job(s) to end') })]);
  } finally {
    await w.stop();
  }
}, 60_000);
