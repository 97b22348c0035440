// Policies as a worker applies them (docs/DESIGN.md, "Policies"): a handler's ctx.rateLimited, a
// policy reloaded when the namespace's version moves, and keys computed at enqueue, through
// createWorker and createClient on a real server. test/ledger/contract.ts holds the rules of the
// ledger's calls, test/faults/policies.test.ts the fleet with crashes.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { createClient, createWorker, defineJob, type JobContext, type Worker } from '../../src';
import { registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

const started: Worker[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.stop()));
});
const run = async (worker: Worker) => {
  started.push(worker);
  await worker.start();
  return worker;
};

/** A job's attempts, in the ledger as a reader sees it: a success's last may be its acta.succeeded_jobs row (acta.all_executions). */
const ledgerOf = async (id: string) =>
  (
    await db.query<{ outcome: string; charged: boolean; gap_ms: number }>(
      `select outcome, charged,
              (extract(epoch from claimed_at - lag(finished_at) over (order by execution)) * 1000)::int as gap_ms
         from acta.all_executions where job_id = $1 order by execution`,
      [id],
    )
  ).rows;

test('ctx.rateLimited: the attempt ends uncharged, the job runs again after retryAfterMs, and the meter stays shut for the other jobs of its key meanwhile', async () => {
  const namespace = `rl-${randomUUID()}`;
  const seen: { i: number; at: number }[] = [];
  const api = defineJob({
    name: 'api',
    rate: { key: (p: { account: string; i: number }) => p.account, limit: 100, perMs: 1_000 },
    handler: (p: { account: string; i: number }, ctx: JobContext) => {
      seen.push({ i: p.i, at: Date.now() });
      if (p.i === 0 && ctx.attempt === 1 && ctx.execution === 1) ctx.rateLimited({ retryAfterMs: 600 });
      return p.i;
    },
  });
  await run(createWorker({ db, namespace, definitions: [api], executors: 1, heartbeatIntervalMs: 500, logger: silentLogger }));
  const client = createClient({ force: true, db, namespace, definitions: [api] });
  const [first] = await client.enqueueMany([{ definition: api, payload: { account: 'a', i: 0 } }]);
  await waitFor(async () => (await ledgerOf(first.id)).length === 1, 'the rate-limited attempt');
  const held = await client.enqueue(api, { account: 'a', i: 1 }); // the same meter, while it is shut
  await client.enqueue(api, { account: 'b', i: 2 }); // another meter: not held back
  await waitFor(async () => (await client.getJob(first.id))?.status === 'succeeded', 'the job to succeed after its delay', 10_000);
  const ledger = await ledgerOf(first.id);
  expect(ledger.map((e) => [e.outcome, e.charged])).toEqual([
    ['rate_limited', false],
    ['succeeded', true],
  ]);
  expect(ledger[1].gap_ms).toBeGreaterThanOrEqual(590); // the database's clock; 600 ms less rounding
  expect((await client.getJob(first.id))?.attempts).toBe(1);
  await waitFor(async () => seen.some((s) => s.i === 1), 'the held job of the same key');
  const heldJob = seen.find((s) => s.i === 1)!;
  const otherKey = seen.find((s) => s.i === 2)!;
  // Not before the meter opened: the held job's claim came 600 ms after the rate-limited attempt
  // ended, both on the database's clock (less rounding).
  const { rows } = await db.query<{ ms: number }>(
    `select extract(epoch from h.claimed_at - l.finished_at) * 1000 as ms
       from acta.all_executions h, acta.all_executions l
      where h.job_id = $1 and h.execution = 1 and l.job_id = $2 and l.execution = 1`,
    [held.id, first.id],
  );
  expect(Number(rows[0].ms)).toBeGreaterThanOrEqual(590);
  expect(otherKey.at).toBeLessThan(heldJob.at);
});

test("a worker reloads its definitions' policy when the namespace's version moves: a newer build's timeout applies to the running worker", async () => {
  const namespace = `reload-${randomUUID()}`;
  const slow = (timeoutMs: number) =>
    defineJob({
      name: 'slow',
      timeoutMs,
      maxAttempts: 1,
      handler: (_: null, ctx: JobContext) => new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, 1_500);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(new Error(`aborted: ${String(ctx.signal.reason)}`));
        });
      }),
    });
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  await run(createWorker({ db, namespace, definitions: [slow(60_000)], build: 'b1', executors: 1, heartbeatIntervalMs: 200, logger }));
  // A newer build declares a timeout of 100 ms (its registration, as a starting worker makes it).
  await registerWorker(db, { workerId: randomUUID(), namespace, hostname: 'test', pid: 1, definitions: ['slow'], maxAttempts: [1], leaseMs: 800, build: 'b2', policies: { slow: declaredPolicy(slow(100)) } });
  // The running b1 worker's next beats report the moved version, and it reloads.
  await waitFor(() => lines.some((l) => l.includes('definition policies reloaded')), 'the policies to be reloaded', 10_000);
  const [job] = await createClient({ force: true, db, namespace }).enqueueMany([{ definition: 'slow', payload: null }]);
  const failed = await waitFor(async () => {
    const j = await createClient({ force: true, db, namespace }).getJob(job.id);
    return j?.status === 'failed' ? j : undefined;
  }, 'the job to fail at the newer timeout', 10_000);
  expect(failed.error).toMatchObject({ name: 'AttemptTimeoutError', message: 'attempt exceeded its timeout of 100 ms' });
});

test('enqueue computes a job\'s keys from its definition, and refuses what would limit nothing or cannot be stored, writing nothing', async () => {
  const namespace = `keys-${randomUUID()}`;
  const sync = defineJob({
    name: 'sync',
    handler: () => undefined,
    concurrency: { key: (p: { tenant: string }) => `tenant:${p.tenant}`, limit: 2 },
    lane: (p: { tenant: string }) => p.tenant,
  });
  const client = createClient({ force: true, db, namespace, definitions: [sync] });
  const [a] = await client.enqueueMany([{ definition: 'sync', payload: { tenant: 'acme' } }]);
  const b = await client.enqueue(sync, { tenant: 'acme' }, { concurrencyKey: 'given', lane: 'L' });
  const { rows } = await db.query<{ concurrency_key: string; lane: string }>(`select concurrency_key, lane from acta.jobs where id = any ($1::bigint[]) order by id`, [[a.id, b.id]]);
  expect(rows).toEqual([
    { concurrency_key: 'tenant:acme', lane: 'acme' },
    { concurrency_key: 'given', lane: 'L' },
  ]);
  const plain = defineJob({ name: 'plain', handler: () => undefined });
  await expect(createClient({ force: true, db, namespace, definitions: [plain] }).enqueue('plain', {}, { rateKey: 'r' })).rejects.toThrow('rateKey: definition "plain" has no rate policy');
  // The lane function's answer for an empty tenant is an empty string: no key.
  await expect(client.enqueue(sync, { tenant: '' })).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringContaining('lane of definition "sync" must be a non-empty string') });
  await expect(client.enqueue(sync, { tenant: 'x' }, { concurrencyKey: 'k'.repeat(1_001) })).rejects.toThrow('concurrencyKey must be at most 1000 bytes');
  const throwing = defineJob({ name: 'sync', handler: () => undefined, lane: () => { throw new Error('no lane'); } });
  await expect(client.enqueueMany([{ definition: sync, payload: { tenant: 'x' } }, { definition: throwing, payload: {} }])).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringContaining('no lane') });
  const { rows: count } = await db.query<{ n: number }>(`select count(*)::int as n from acta.jobs where namespace = $1`, [namespace]);
  expect(count[0].n).toBe(2);
});

test('a concurrency or rate policy without a key function limits the whole definition: its jobs are keyed by its name, unless enqueued with a key; a worker holds that limit', async () => {
  const namespace = `whole-${randomUUID()}`;
  let running = 0;
  let most = 0;
  const solo = defineJob({
    name: 'solo',
    concurrency: { limit: 1 },
    rate: { limit: 1_000, perMs: 1_000 },
    handler: async () => {
      most = Math.max(most, ++running);
      await new Promise((resolve) => setTimeout(resolve, 20));
      running--;
    },
  });
  const client = createClient({ force: true, db, namespace, definitions: [solo] });
  const ids = (await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ definition: solo, payload: { i } })))).map((r) => r.id);
  const given = (await client.enqueue(solo, {}, { concurrencyKey: 'own' })).id;
  expect(await client.getJob(ids[0])).toMatchObject({ concurrencyKey: 'solo', rateKey: 'solo' });
  expect(await client.getJob(given)).toMatchObject({ concurrencyKey: 'own', rateKey: 'solo' });
  await db.query('delete from acta.jobs where id = $1', [given]);
  await run(createWorker({ db, namespace, definitions: [solo], logger: silentLogger, executors: 4 }));
  await waitFor(async () => (await Promise.all(ids.map((id) => client.getJob(id)))).every((j) => j?.status === 'succeeded'), 'the jobs to succeed');
  expect(most).toBe(1);
});

test('a definition refuses a policy it cannot apply, where it is written', () => {
  const handler = () => undefined;
  expect(() => defineJob({ name: 'x', handler, concurrency: { key: () => 'k' } })).toThrow('concurrency of definition "x" needs a limit');
  expect(() => defineJob({ name: 'x', handler, concurrency: { limit: 0 } })).toThrow('concurrency.limit of definition "x"');
  expect(() => defineJob({ name: 'x', handler, rate: { limit: 5 } as never })).toThrow('rate.perMs of definition "x"');
  expect(() => defineJob({ name: 'x', handler, fair: true })).toThrow('fair of definition "x" needs concurrency');
  expect(() => defineJob({ name: 'x', handler, lane: 'L' as never })).toThrow('lane of definition "x" must be a function');
  expect(() => defineJob({ name: 'x', handler, concurrency: { limit: 1, keys: () => 'k' } as never })).toThrow('unknown field of concurrency of definition "x" "keys"');
  expect(() => defineJob({ name: 'x', handler, fair: true, concurrency: { key: () => 'k' } })).not.toThrow();
});
