/**
 * The lease protocol in SQL (acta.heartbeat, acta.recover_jobs; docs/DESIGN.md, "The lease clock"
 * and "Delivery"), one call at a time so every state is exact: the bound on uncharged returns,
 * "worker lost" when attempts are used up, the lease-holder fence of the heartbeat, one recovery
 * pass per lease, and dead workers. Expiry is simulated by moving lease_expires_at into the past:
 * the database clock decides. One worker-level test: a starting worker runs the pass its
 * registration took.
 */
import { randomUUID } from 'node:crypto';
import * as net from 'node:net';
import { Client } from 'pg';
import { createClient, createWorker, defineJob } from '../../src';
import { claimJobs, recoverJobs } from '../../src/db/jobs';
import { recordStep } from '../../src/db/steps';
import { heartbeat, registerWorker, stopWorker } from '../../src/db/workers';
import { aroundStatements } from '../helpers/around';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.workers, acta.definitions'));

const LEASE_MS = 60_000;
const DEAD_AFTER_MS = 105_000;

const claimOne = async (workerId: string) => {
  const { rows } = await claimJobs(db, { namespace: 'default', workerId, definitions: ['job'], limit: 1, leaseMs: LEASE_MS });
  expect(rows).toHaveLength(1);
  return rows[0];
};
const expire = (id: string) => db.query(`update acta.jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [id]);
// acta.all_jobs, acta.all_executions: a succeeded job moves to acta.succeeded_jobs, its last attempt's record.
const job = async (id: string) =>
  (await db.query<{ status: string; attempts: number; execution: number; uncharged_returns: number; error: { name?: string; message?: string } | null }>(
    'select status, attempts, execution, uncharged_returns, error from acta.all_jobs where id = $1',
    [id],
  )).rows[0];
const ledger = async (id: string) =>
  (await db.query<{ execution: number; outcome: string; charged: boolean }>('select execution, outcome, charged from acta.all_executions where job_id = $1 order by execution', [id])).rows;

test('a recorded step marks the attempt started: lost after it, the attempt is charged (a maxAttempts-1 job ends Failed)', async () => {
  // The case it guards (docs/decisions/2026-11-30-a-recorded-step-marks-its-attempt-started.md):
  // killed 300 ms into handlers that had recorded steps, before any heartbeat, a maxAttempts-1 job
  // went back uncharged 3 times and ran 4 times.
  const { id } = await createClient({ force: true, db }).enqueue('job', {}, { maxAttempts: 1 });
  const worker = randomUUID();
  const row = await claimOne(worker);
  expect(await recordStep(db, { workerId: worker, jobId: id, execution: row.execution, name: 's', resultJson: '1' })).toMatchObject({ status: 'recorded' });
  expect(await recordStep(db, { workerId: worker, jobId: id, execution: row.execution, name: 't', resultJson: '2' })).toMatchObject({ status: 'recorded' });
  await expire(id); // the worker dies before its first heartbeat
  const [r] = await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS });
  expect({ status: r.status, charged: r.charged }).toEqual({ status: 'failed', charged: true });
  expect(await job(id)).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'WorkerLost' } });
  expect(await ledger(id)).toEqual([{ execution: 1, outcome: 'lost', charged: true }]);
  // The fence still holds for the first record of an attempt: a stale one writes nothing.
  expect(await recordStep(db, { workerId: worker, jobId: id, execution: row.execution, name: 'u', resultJson: '3' })).toMatchObject({ status: 'stale' });
});

test('a job that never reports a start goes back uncharged at most 3 times; every later return is charged', async () => {
  const { id } = await createClient({ force: true, db }).enqueue('job', {}, { maxAttempts: 2 });
  const worker = randomUUID();
  const seen: { status: string; charged: boolean }[] = [];
  for (let i = 0; i < 5; i++) {
    await claimOne(worker); // and the worker dies before its first heartbeat: started stays false
    await expire(id);
    const [r] = await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS });
    seen.push({ status: r.status, charged: r.charged });
    if (r.status === 'failed') break;
  }
  expect(seen).toEqual([
    { status: 'ready', charged: false },
    { status: 'ready', charged: false },
    { status: 'ready', charged: false },
    { status: 'ready', charged: true }, // attempt 1 of 2
    { status: 'failed', charged: true }, // attempt 2 of 2: used up
  ]);
  expect(await job(id)).toMatchObject({ status: 'failed', attempts: 2, execution: 5, uncharged_returns: 3 });
  expect((await job(id)).error).toMatchObject({ name: 'WorkerLost', message: expect.stringMatching(/^worker lost/) });
  expect((await ledger(id)).map((e) => e.outcome)).toEqual(['lost_uncharged', 'lost_uncharged', 'lost_uncharged', 'lost', 'lost']);
});

test('a started attempt whose job has no attempts left is recovered to Failed, "worker lost"', async () => {
  const { id } = await createClient({ force: true, db }).enqueue('job', {}, { maxAttempts: 1 });
  const worker = randomUUID();
  const row = await claimOne(worker);
  const beat = await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution: row.execution, started: true }], leaseMs: LEASE_MS });
  expect(beat.renewed).toHaveLength(1);
  await expire(id);
  expect(await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS })).toEqual([{ id, execution: 1, status: 'failed', charged: true }]);
  expect(await job(id)).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'WorkerLost' } });
  expect(await ledger(id)).toEqual([{ execution: 1, outcome: 'lost', charged: true }]);
});

test("recovery applies the definition's maxAttempts, as its workers registered it, to a job without its own", async () => {
  // Before migration 0004 a job enqueued by name got 25, and recovery charged it up to 25 lost
  // attempts whatever its definition allowed.
  const worker = randomUUID();
  await registerWorker(db, { workerId: worker, namespace: 'default', hostname: 'test', pid: 1, definitions: ['job'], maxAttempts: [1], leaseMs: LEASE_MS });
  const client = createClient({ force: true, db });
  const { id: byDefinition } = await client.enqueue('job', { n: 1 });
  const { id: own } = await client.enqueue('job', { n: 2 }, { maxAttempts: 2 });
  for (const id of [byDefinition, own]) {
    const row = await claimOne(worker);
    expect(row).toMatchObject({ id, maxAttempts: id === own ? 2 : null });
    await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution: row.execution, started: true }], leaseMs: LEASE_MS });
    await expire(id);
  }
  const recovered = await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS });
  expect(new Map(recovered.map((r) => [r.id, r.status]))).toEqual(new Map([[byDefinition, 'failed'], [own, 'ready']]));
  expect(await job(byDefinition)).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'WorkerLost' } });

  // The last registration stands (a rolling deploy): a worker declaring 3 attempts.
  await registerWorker(db, { workerId: randomUUID(), namespace: 'default', hostname: 'test', pid: 2, definitions: ['job'], maxAttempts: [3], leaseMs: LEASE_MS });
  const { id: later } = await client.enqueue('job', { n: 3 });
  await db.query(`update acta.jobs set status = 'succeeded' where id = $1`, [own]);
  const row = await claimOne(worker);
  expect(row.id).toBe(later);
  await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id: later, execution: row.execution, started: true }], leaseMs: LEASE_MS });
  await expire(later);
  expect(await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS })).toEqual([{ id: later, execution: 1, status: 'ready', charged: true }]);
});

test("a stopped or dead worker's maxAttempts gives way to the newest live worker's (a canary leaves no policy behind)", async () => {
  const declared = async () =>
    (await db.query<{ max_attempts: number | null }>(`select max_attempts from acta.definitions where namespace = 'default' and name = 'job'`)).rows[0].max_attempts;
  const register = (workerId: string, pid: number, maxAttempts: number) =>
    registerWorker(db, { workerId, namespace: 'default', hostname: 'test', pid, definitions: ['job', `other-${pid}`], maxAttempts: [maxAttempts, 9], leaseMs: LEASE_MS });
  const a1 = randomUUID();
  const a2 = randomUUID();
  await register(a1, 1, 5);
  await register(a2, 2, 5);
  // A canary declaring 1 starts (the last starter's declaration stands) and stops gracefully.
  const canary = randomUUID();
  await register(canary, 3, 1);
  expect(await declared()).toBe(1);
  await stopWorker(db, canary);
  expect(await declared()).toBe(5);
  // Another canary is SIGKILLed: its declaration stands until a recovery pass marks it dead.
  const killed = randomUUID();
  await register(killed, 4, 2);
  expect(await declared()).toBe(2);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 hour' where id = $1`, [killed]);
  await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS });
  expect(await declared()).toBe(5);
  // Recovery then judges a lost attempt by 5, not by a gone worker's 1 or 2.
  const { id } = await createClient({ force: true, db }).enqueue('job', {});
  const row = await claimOne(a1);
  await heartbeat(db, { workerId: a1, namespace: 'default', held: [{ id, execution: row.execution, started: true }], leaseMs: LEASE_MS });
  await expire(id);
  expect(await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS })).toEqual([{ id, execution: 1, status: 'ready', charged: true }]);
  // With no live worker running the definition, its last declaration stays.
  await stopWorker(db, a1);
  await stopWorker(db, a2);
  expect(await declared()).toBe(5);
});

test("the heartbeat renews only the caller's own lease: the same (job, execution) from another worker is lost", async () => {
  const { id } = await createClient({ force: true, db }).enqueue('job', {});
  const owner = randomUUID();
  const row = await claimOne(owner);
  const held = [{ id, execution: row.execution, started: true }];
  const stranger = await heartbeat(db, { workerId: randomUUID(), namespace: 'default', held, leaseMs: LEASE_MS });
  expect(stranger).toMatchObject({ renewed: [], locked: [], lost: held });
  const mine = await heartbeat(db, { workerId: owner, namespace: 'default', held, leaseMs: LEASE_MS });
  expect(mine).toMatchObject({ renewed: held, lost: [] });
  // A lease that ran out but that no pass has taken yet is still the owner's, and renewable.
  await expire(id);
  expect((await heartbeat(db, { workerId: owner, namespace: 'default', held, leaseMs: LEASE_MS })).renewed).toEqual(held);
  expect(await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS })).toEqual([]);
});

test('the heartbeat waits briefly for a row another transaction holds (a step record): renewed; held longer: locked', async () => {
  const { id } = await createClient({ force: true, db }).enqueue('job', {});
  const worker = randomUUID();
  const row = await claimOne(worker);
  const held = [{ id, execution: row.execution, started: true }];
  const other = new Client({ connectionString: tdb.url });
  await other.connect();
  const holdFor = async (ms: number) => {
    await other.query('begin');
    await other.query('select 1 from acta.jobs where id = $1 for share', [id]); // as acta.record_step does until it commits
    setTimeout(() => void other.query('commit'), ms);
  };
  try {
    // A step record committing as soon as the heartbeat waits for it (at most 2 s on: a heartbeat
    // that does not wait has answered by then). A fixed delay could outlast the 100 ms wait under load.
    await other.query('begin');
    await other.query('select 1 from acta.jobs where id = $1 for share', [id]);
    const committed = (async () => {
      let waited = false;
      for (let i = 0; i < 400 && !waited; i++) {
        const { rows } = await other.query<{ waiting: boolean }>(`select exists (select 1 from pg_stat_activity a where pg_backend_pid() = any (pg_blocking_pids(a.pid))) as waiting`);
        waited = rows[0].waiting;
        if (!waited) await new Promise((r) => setTimeout(r, 5));
      }
      await other.query('commit');
      return waited;
    })();
    const brief = await heartbeat(db, { workerId: worker, namespace: 'default', held, leaseMs: LEASE_MS });
    expect(await committed).toBe(true); // the heartbeat waited for the record
    expect(brief.renewed.map((r) => r.id)).toEqual([id]); // skipped as "locked" before the fix
    await holdFor(600); // longer than the 100 ms the heartbeat waits
    const long = await heartbeat(db, { workerId: worker, namespace: 'default', held, leaseMs: LEASE_MS });
    expect(long.locked.map((r) => r.id)).toEqual([id]);
    expect(long.renewed).toEqual([]);
  } finally {
    await new Promise((r) => setTimeout(r, 700));
    await other.end();
  }
});

test('of many heartbeats and registrations that find the pass due, exactly one takes it, and it is due again one lease on', async () => {
  await db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = 'default' and pass = 'recovery'`);
  // A registration is a starting worker's first beat (register_worker.sql): it competes for the pass too.
  const beats = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      i % 2 === 0
        ? heartbeat(db, { workerId: randomUUID(), namespace: 'default', held: [], leaseMs: LEASE_MS })
        : registerWorker(db, { workerId: randomUUID(), namespace: 'default', hostname: 'test', pid: i, definitions: ['job'], leaseMs: LEASE_MS }),
    ),
  );
  expect(beats.filter((b) => b.duePasses.includes('recovery'))).toHaveLength(1);
  const { rows } = await db.query<{ in_ms: number }>(
    `select extract(epoch from due_at - now()) * 1000 as in_ms from acta.passes where namespace = 'default' and pass = 'recovery'`,
  );
  expect(Number(rows[0].in_ms)).toBeGreaterThan(LEASE_MS - 5_000);
  expect(Number(rows[0].in_ms)).toBeLessThanOrEqual(LEASE_MS);
  expect((await heartbeat(db, { workerId: randomUUID(), namespace: 'default', held: [], leaseMs: LEASE_MS })).duePasses).toEqual([]);
  expect((await registerWorker(db, { workerId: randomUUID(), namespace: 'default', hostname: 'test', pid: 9, definitions: ['job'], leaseMs: LEASE_MS })).duePasses).toEqual([]);
});

test('a starting worker whose registration took the pass runs it at once: a dead fleet\'s expired rows come back without waiting for a beat', async () => {
  // A fleet that was down: its row's lease ran out, and the namespace's pass is due.
  const { id } = await createClient({ force: true, db }).enqueue('job', { n: 1 });
  await claimOne(randomUUID());
  await expire(id);
  await db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = 'default' and pass = 'recovery'`);
  const runs: number[] = [];
  const definition = defineJob({ name: 'job', handler: (_p, ctx) => void runs.push(ctx.execution) });
  // H = 45 s: no heartbeat comes within this test, and the registration moved the pass a lease on.
  const worker = createWorker({ db, definitions: [definition], logger: silentLogger });
  await worker.start();
  try {
    await waitFor(async () => (await job(id)).status === 'succeeded', 'the recovered job to succeed', 10_000);
  } finally {
    await worker.stop();
  }
  expect(runs).toEqual([2]);
});

test('a start that ends before the pipeline runs takes no recovery pass for good: a busy metrics port, a stop during registration', async () => {
  // The case it guards (docs/decisions/2026-12-01-registration-is-the-first-beat.md): both left the
  // due pass taken and never run, so a dead fleet's expired rows waited a whole lease more.
  const dueNow = async () =>
    (await db.query<{ due: boolean }>(`select due_at <= now() as due from acta.passes where namespace = 'default' and pass = 'recovery'`)).rows[0].due;
  // The namespace's row (a registration makes it).
  await registerWorker(db, { workerId: randomUUID(), namespace: 'default', hostname: 'test', pid: 1, definitions: ['job'], leaseMs: LEASE_MS });
  const definition = defineJob({ name: 'job', handler: () => undefined });
  const makeDue = () => db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = 'default' and pass = 'recovery'`);

  // A metrics port in use: start() fails before it registers.
  await makeDue();
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '0.0.0.0', resolve));
  try {
    const port = (busy.address() as net.AddressInfo).port;
    const failing = createWorker({ db, definitions: [definition], logger: silentLogger, metricsPort: port });
    await expect(failing.start()).rejects.toMatchObject({ code: 'ACTA_METRICS_PORT', cause: expect.objectContaining({ code: 'EADDRINUSE' }) });
    expect(await dueNow()).toBe(true);
    expect(await db.query(`select 1 from acta.workers where id = $1`, [failing.id]).then((r) => r.rows)).toEqual([]);
  } finally {
    busy.close();
  }

  // stop() while the registration's answer is on its way: the pass it took is due again.
  await makeDue();
  const slow = aroundStatements(db, async (text, _params, run) => {
    const answer = await run();
    if (text.includes('register_worker')) await new Promise((r) => setTimeout(r, 300));
    return answer;
  });
  const stopped = createWorker({ db: slow, definitions: [definition], logger: silentLogger });
  const start = stopped.start().catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100));
  await stopped.stop();
  await start;
  expect((await db.query<{ status: string }>(`select status from acta.workers where id = $1`, [stopped.id])).rows).toEqual([{ status: 'stopped' }]);
  expect(await dueNow()).toBe(true);
});

test('the registration of a worker in a new namespace takes its first recovery pass', async () => {
  const namespace = `fresh-${randomUUID()}`;
  const first = await registerWorker(db, { workerId: randomUUID(), namespace, hostname: 'test', pid: 1, definitions: ['job'], leaseMs: LEASE_MS });
  const second = await registerWorker(db, { workerId: randomUUID(), namespace, hostname: 'test', pid: 2, definitions: ['job'], leaseMs: LEASE_MS });
  expect([first.duePasses.includes('recovery'), second.duePasses.includes('recovery')]).toEqual([true, false]);
});

test('a worker with a shorter lease pulls the next pass in (mixed heartbeat intervals); a longer one never pushes it out', async () => {
  const dueInMs = async () =>
    Number((await db.query<{ in_ms: number }>(`select extract(epoch from due_at - now()) * 1000 as in_ms from acta.passes where namespace = 'default' and pass = 'recovery'`)).rows[0].in_ms);
  // As a default worker (H = 45 s) leaves it after taking a pass: due in 180 s.
  await db.query(`update acta.passes set due_at = now() + interval '180 seconds' where namespace = 'default' and pass = 'recovery'`);
  const short = await heartbeat(db, { workerId: randomUUID(), namespace: 'default', held: [], leaseMs: 2_000 }); // H = 0.5 s
  expect(short.duePasses).toEqual([]); // not due yet: pulled in, not taken
  expect(await dueInMs()).toBeLessThanOrEqual(2_000);
  expect(await dueInMs()).toBeGreaterThan(0);
  await heartbeat(db, { workerId: randomUUID(), namespace: 'default', held: [], leaseMs: 180_000 });
  expect(await dueInMs()).toBeLessThanOrEqual(2_000); // the longer lease does not push it back out
});

test('a worker silent for longer than 7 H is marked dead by the pass; its next heartbeat makes it alive again', async () => {
  const silent = randomUUID();
  const live = randomUUID();
  for (const workerId of [silent, live]) {
    await registerWorker(db, { workerId, namespace: 'default', hostname: 'test', pid: 1, definitions: ['job'], leaseMs: LEASE_MS });
  }
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '106 seconds' where id = $1`, [silent]);
  await recoverJobs(db, { namespace: 'default', deadAfterMs: DEAD_AFTER_MS });
  const status = async () => (await db.query<{ id: string; status: string }>('select id, status from acta.workers')).rows;
  expect(new Map((await status()).map((w) => [w.id, w.status]))).toEqual(new Map([[silent, 'dead'], [live, 'alive']]));
  await heartbeat(db, { workerId: silent, namespace: 'default', held: [], leaseMs: LEASE_MS });
  expect((await status()).every((w) => w.status === 'alive')).toBe(true);
});
