import { Redis } from 'ioredis';
import { Client, Pool } from 'pg';
import { listenOnOwnConnection } from '../../src/db/pgListener';
import { createClient, createPgDb, createWorker, defineJob, redisPublisher, type Db, type Worker } from '../../src';
import pino from 'pino';
import { aroundStatements } from '../helpers/around';
import { createTestDatabase, withDatabase, type TestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

// Wakeups only shorten the wait; SQL polling is truth (DESIGN.md). Latency is read from the
// database's own clock: the job's created_at (enqueue) to its attempt's claimed_at. Each check
// compares against the safety poll, an order of magnitude away, never against a speed target.
// A job that succeeded may have left acta.jobs (migration 0023): its row and its attempts are read
// in acta.all_jobs and acta.all_executions.

let tdb: TestDatabase;
let db: Db;
const workers: Worker[] = [];
const noop = defineJob({ name: 'noop', handler: async () => null });

beforeAll(async () => {
  tdb = await createTestDatabase();
  db = tdb.open();
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
});
afterAll(() => tdb.drop());

/** Enqueues one job and returns enqueue→claim latency in ms on the database clock. */
async function latencyMs(client = createClient({ force: true, db })): Promise<number> {
  const { id } = await client.enqueue('noop', {});
  return waitFor(async () => {
    const { rows } = await db.query<{ ms: number | null }>(
      `select extract(epoch from (e.claimed_at - j.created_at)) * 1000 as ms
       from acta.all_jobs j join acta.all_executions e on e.job_id = j.id where j.id = $1`,
      [id],
    );
    return rows[0] ? Number(rows[0].ms) : null;
  }, 'the job to be worked');
}

async function idleWorker(options: Partial<Parameters<typeof createWorker>[0]> = {}): Promise<Worker> {
  const worker = createWorker({ db, definitions: [noop], logger: silentLogger, executors: 2, ...options });
  workers.push(worker);
  await worker.start();
  await new Promise((r) => setTimeout(r, 300)); // let the first empty claim put it to sleep
  return worker;
}

const listenBackends = async (): Promise<number[]> =>
  (
    await db.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and application_name = 'acta listener'`,
    )
  ).rows.map((r) => r.pid);

test('NOTIFY wakes an idle worker long before its safety poll', async () => {
  await idleWorker({ safetyPollMs: 10_000 });
  const samples = [await latencyMs(), await latencyMs(), await latencyMs()];
  expect(Math.max(...samples)).toBeLessThan(1_000);
});

test('a job due in 300 ms wakes an idle worker, which then sleeps until it is due, not until its poll', async () => {
  await idleWorker({ safetyPollMs: 10_000 });
  const { id } = await createClient({ force: true, db }).enqueue('noop', {}, { runAt: new Date(Date.now() + 300) });
  const lateMs = await waitFor(async () => {
    const { rows } = await db.query<{ ms: number | null }>(
      `select extract(epoch from (e.claimed_at - j.run_at)) * 1000 as ms from acta.all_jobs j join acta.all_executions e on e.job_id = j.id where j.id = $1`,
      [id],
    );
    return rows[0] ? Number(rows[0].ms) : null;
  }, 'the job to be worked', 15_000);
  expect(lateMs).toBeGreaterThanOrEqual(0); // never before it is due
  expect(lateMs).toBeLessThan(1_000); // before: only a job due now was notified, and this one waited for the 10 s poll
});

test("a graceful shutdown's hand-backs wake an idle peer at once", async () => {
  let held = 0;
  const hold = defineJob({
    name: 'hold',
    handler: (_p, { signal }) =>
      new Promise<void>((resolve) => {
        held++;
        if (held > 1) return resolve(); // the peer's run
        signal.addEventListener('abort', () => resolve()); // the stopping worker's run ends at once
      }),
  });
  const stopping = createWorker({ db, definitions: [hold], logger: silentLogger, executors: 1, shutdownTimeoutMs: 0 });
  await stopping.start();
  const { id } = await createClient({ force: true, db }).enqueue('hold', {});
  await waitFor(async () => held === 1, 'the first worker to hold the job');
  const peer = createWorker({ db, definitions: [hold], logger: silentLogger, executors: 1, safetyPollMs: 10_000 });
  workers.push(peer);
  await peer.start();
  await new Promise((r) => setTimeout(r, 300)); // its first claim found nothing: asleep for 10 s
  const stoppedAt = Date.now();
  await stopping.stop();
  await waitFor(async () => held === 2, 'the peer to run the handed-back job', 15_000);
  expect(Date.now() - stoppedAt).toBeLessThan(2_000); // before: up to the peer's 10 s poll
  const outcomes = await waitFor(async () => {
    const { rows } = await db.query<{ outcome: string }>('select outcome from acta.all_executions where job_id = $1 order by execution', [id]);
    return rows.length === 2 ? rows.map((r) => r.outcome) : null;
  }, "the peer's completion");
  expect(outcomes).toEqual(['handed_back', 'succeeded']);
});

test('a Db on a Pool built from fields (no connection string) LISTENs on that pool\'s database', async () => {
  const u = new URL(tdb.url);
  const password = u.password ? decodeURIComponent(u.password) : undefined; // none on a trust-auth server
  const pool = new Pool({ host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username), password, database: u.pathname.slice(1) });
  const fieldsDb = createPgDb({ pool, ownsPool: true });
  const got: string[] = [];
  try {
    await fieldsDb.listen('acta_fields_test', { onNotify: (payload) => got.push(payload) });
    await db.query(`select pg_notify('acta_fields_test', 'hello')`);
    await waitFor(async () => (got.includes('hello') ? true : null), 'the NOTIFY to arrive', 5_000);
  } finally {
    await fieldsDb.close();
  }
});

test('a Db with a listen connection string of its own LISTENs there (a direct connection beside a pooler), and wakes an idle worker', async () => {
  const listenUrl = new URL(tdb.url);
  listenUrl.searchParams.set('application_name', 'acta_own_listen_url');
  const listenDb = createPgDb({ connectionString: tdb.url, listenConnectionString: listenUrl.toString() });
  try {
    await idleWorker({ db: listenDb, safetyPollMs: 10_000 });
    const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'acta_own_listen_url'`);
    expect(rows[0].n).toBe(1);
    expect(await latencyMs()).toBeLessThan(1_000);
  } finally {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await listenDb.close();
  }
});

test('a listen connection string naming another database: NOTIFY does not reach it, so the worker warns once, stops listening, and the safety poll claims', async () => {
  const lines: { level: number; msg: string; err?: { code?: string } }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const listenDb = createPgDb({ connectionString: tdb.url, listenConnectionString: withDatabase(tdb.url, 'postgres') });
  try {
    await idleWorker({ db: listenDb, logger, safetyPollMs: 400 });
    const warned = await waitFor(() => lines.find((l) => l.msg.startsWith('NOTIFY does not reach the LISTEN connection')), 'the warning', 15_000);
    expect(warned).toMatchObject({ level: 40, err: { code: 'ACTA_LISTEN_UNDELIVERED' } });
    expect(await latencyMs()).toBeLessThan(400 + 100 + 1_000);
    expect(lines.filter((l) => l.level >= 40)).toEqual([warned]); // once; no reconnect loop, nothing else
  } finally {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await listenDb.close();
  }
});

test('with the LISTEN connection killed, jobs still start within the safety poll, and wakeups return after reconnect', async () => {
  await idleWorker({ safetyPollMs: 10_000 });
  const before = await waitFor(async () => { const pids = await listenBackends(); return pids.length ? pids : null; }, 'a LISTEN connection', 10_000);
  const admin = new Client({ connectionString: tdb.url });
  await admin.connect();
  try {
    await admin.query('select pg_terminate_backend(pid) from unnest($1::int[]) pid', [before]);
  } finally {
    await admin.end();
  }
  // Within the safety poll (+ its 100 ms jitter) whatever the wakeups do.
  expect(await latencyMs()).toBeLessThan(10_000 + 100 + 1_000);
  const after = await waitFor(async () => {
    const pids = await listenBackends();
    return pids.some((p) => !before.includes(p)) ? pids : null;
  }, 'the listener to reconnect', 15_000);
  expect(after.length).toBeGreaterThan(0);
  // Wakeup latency is back: far below the 10 s safety poll.
  expect(await latencyMs()).toBeLessThan(1_000);
});

test('with every wakeup source off, the safety poll alone claims the job', async () => {
  await idleWorker({ safetyPollMs: 400, listen: false });
  const ms = await latencyMs();
  expect(ms).toBeLessThan(400 + 100 + 1_000);
});

test('Redis pub/sub wakes an idle worker that does not LISTEN', async () => {
  const url = process.env.ACTA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
  } catch (err) {
    if (process.env.CI) throw err;
    console.warn(`skipping the Redis wakeup check: no Redis at ${url} (${(err as Error).message}); CI always runs it`);
    return;
  }
  try {
    await idleWorker({ safetyPollMs: 10_000, listen: false, redis });
    const client = createClient({ force: true, db, publishWakeup: redisPublisher(redis) });
    await new Promise((r) => setTimeout(r, 200)); // the subscription is set up
    const samples = [await latencyMs(client), await latencyMs(client)];
    expect(Math.max(...samples)).toBeLessThan(1_000);
  } finally {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await redis.quit();
  }
});

test('the worker serves Prometheus metrics on /metrics', async () => {
  const worker = await idleWorker({ metricsPort: 0 });
  await latencyMs();
  // Read while the worker is idle: during a claim in flight (an idle poll) its permits are the claimer's.
  let text = '';
  await waitFor(async () => {
    text = await (await fetch(`http://127.0.0.1:${worker.metricsServerPort}/metrics`)).text();
    return /acta_completions_total\{outcome="succeeded"\} 1/.test(text) && text.includes('acta_permits_free 2');
  }, 'the completion to be counted, with the worker idle');
  for (const name of [
    'acta_jobs_inflight{state="executing"}',
    'acta_completions_batch_size_bucket',
    'acta_claim_duration_seconds_bucket',
    'acta_claim_rows_asked_total',
    'acta_claim_rows_claimed_total',
    'acta_completion_write_retries_total',
    'acta_permits_free 2',
    'acta_listener_reconnects_total 0',
    'acta_worker_degraded 0',
  ]) {
    expect(text).toContain(name);
  }
  // A scrape config's `params` come as a query string; another path is not found.
  const base = `http://127.0.0.1:${worker.metricsServerPort}`;
  const withQuery = await fetch(`${base}/metrics?module=acta`);
  expect(withQuery.status).toBe(200);
  expect(await withQuery.text()).toContain('acta_permits_free');
  expect((await fetch(`${base}/metricsx`)).status).toBe(404);
});

test('metricsPort: two workers of one process each serve their own; a port in use fails the start with ACTA_METRICS_PORT, nothing registered; a stopped worker frees its port', async () => {
  const a = await idleWorker({ metricsPort: 0 });
  const b = await idleWorker({ metricsPort: 0 });
  expect(a.metricsServerPort).not.toBe(b.metricsServerPort);
  for (const w of [a, b]) expect(await (await fetch(`http://127.0.0.1:${w.metricsServerPort}/metrics`)).text()).toContain('acta_worker_degraded 0');
  const port = a.metricsServerPort!;
  const taken = createWorker({ db, definitions: [noop], logger: silentLogger, metricsPort: port });
  await expect(taken.start()).rejects.toMatchObject({ code: 'ACTA_METRICS_PORT', message: expect.stringContaining(`metricsPort (--metrics-port) ${port} on 0.0.0.0 is in use`), cause: expect.objectContaining({ code: 'EADDRINUSE' }) });
  expect((await db.query('select 1 from acta.workers where id = $1', [taken.id])).rows).toEqual([]);
  await a.stop();
  const next = createWorker({ db, definitions: [noop], logger: silentLogger, metricsPort: port });
  workers.push(next);
  await next.start();
  expect(next.metricsServerPort).toBe(port);
});

test('metricsPort: a stop while the start waits for the database frees the port at once', async () => {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let asked = false;
  // The database does not answer until the gate opens: the start's schema check, and the stop that waits for it, hang.
  const stalled = aroundStatements(db, async (_text, _params, run) => {
    asked = true;
    await gate;
    return run();
  });
  const probe = await idleWorker({ metricsPort: 0 });
  const port = probe.metricsServerPort!;
  await probe.stop();
  const first = createWorker({ db: stalled, definitions: [noop], logger: silentLogger, metricsPort: port });
  const starting = first.start().catch(() => undefined);
  let stopping: Promise<unknown> = Promise.resolve();
  try {
    // The schema check is asked once the server has opened (a stop while it opens ends the start
    // before the check: test/stopDuringStart.test.ts).
    await waitFor(() => asked, 'the schema check (the server has opened by then)');
    stopping = first.stop();
    const next = createWorker({ db, definitions: [noop], logger: silentLogger, metricsPort: port });
    workers.push(next);
    // Was: ACTA_METRICS_PORT, the server stayed open until the stop had ended.
    await next.start();
    expect(next.metricsServerPort).toBe(port);
  } finally {
    open();
    await Promise.all([starting, stopping]);
  }
});

test('a process whose event loop is blocked past the probe timeout keeps its healthy LISTEN connection (the answer waiting on the socket counts)', async () => {
  let downs = 0;
  let connects = 0;
  const stop = await listenOnOwnConnection({ connectionString: tdb.url }, 'acta_busy_probe', { onNotify: () => undefined, onConnect: () => connects++, onDown: () => downs++ }, { probeIntervalMs: 600, probeTimeoutMs: 300 });
  let blocks = 0;
  // Just after each probe goes out, 450 ms of synchronous work (a handler's CPU-bound step). The
  // probe's timeout leaves a loaded server's answer time to come: at 100 ms, some did not in time.
  const blocker = setInterval(() => {
    if (++blocks > 6) return;
    setImmediate(() => {
      const until = Date.now() + 450;
      while (Date.now() < until) {
        /* busy */
      }
    });
  }, 600);
  try {
    await new Promise((r) => setTimeout(r, 4_000));
  } finally {
    clearInterval(blocker);
    await stop();
  }
  expect({ downs, connects }).toEqual({ downs: 0, connects: 1 });
});
