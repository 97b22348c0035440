/**
 * acta behind PgBouncer in transaction mode (docs/operating.md, "Behind PgBouncer"): a PgBouncer of
 * this file's own (pool_mode = transaction, 4 server connections, statements not tracked as 1.18
 * does not) in front of the test server, and real processes through it: `acta migrate` from three
 * at once, workers that drain, renew, recover and never LISTEN through the pooler (one warning,
 * then the safety poll), a worker whose LISTEN has a direct connection (ACTA_LISTEN_URL), the CLI
 * and the dashboard. PgBouncer is a machine package: without it (apt-get install pgbouncer, or
 * ACTA_TEST_PGBOUNCER) the file's tests are skipped with the reason printed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { createClient, createPgDb, startDashboard, type Db } from '../../src';
import { runActa } from '../helpers/cli';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import { eventsFile, killAll, readEvents, spawnWorker, type LogLine, type WorkerProcess } from './harness';

const PGBOUNCER = process.env.ACTA_TEST_PGBOUNCER ?? ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'].find((p) => fs.existsSync(p)) ?? 'pgbouncer';
const HAVE_PGBOUNCER = fs.existsSync(PGBOUNCER);
// Skipped without it, the reason printed, except in CI (.ci/run installs it), where its absence fails the file.
if (!HAVE_PGBOUNCER && process.env.CI) throw new Error(`test/faults/pgbouncer.test.ts: no PgBouncer at ${PGBOUNCER} (.ci/run installs it)`);
if (!HAVE_PGBOUNCER) console.warn(`test/faults/pgbouncer.test.ts skipped: no PgBouncer at ${PGBOUNCER} (apt-get install pgbouncer, or set ACTA_TEST_PGBOUNCER)`);
const bouncerTest = HAVE_PGBOUNCER ? test : test.skip;

/** The worker's warning when NOTIFY does not reach its LISTEN connection (src/worker/wakeups.ts). */
const UNDELIVERED = 'NOTIFY does not reach the LISTEN connection';
/** What PgBouncer logs for each NOTIFY a server connection LISTENing for it gets while no client holds it. */
const DROPPED_NOTIFY = "got packet 'A' from server when not linked";

let tdb: TestDatabase;
/** The test database through the pooler. */
let bouncerUrl: string;
let bouncer: { child: ChildProcess; port: number; log: string } | undefined;
/** The test database directly, for the test's own reads. */
let direct: Db;
const opened: Db[] = [];

beforeAll(async () => {
  if (!HAVE_PGBOUNCER) return;
  tdb = await createTestDatabase({ migrate: false });
  direct = tdb.open();
  bouncer = await startPgBouncer(tdb.url);
  const u = new URL(tdb.url);
  bouncerUrl = `postgres://${u.username}@127.0.0.1:${bouncer.port}${u.pathname}`;
}, 30_000);

afterAll(async () => {
  await killAll();
  await Promise.all(opened.map((db) => db.close().catch(() => undefined)));
  if (bouncer && bouncer.child.exitCode === null) {
    const exited = new Promise((r) => bouncer!.child.once('exit', r));
    bouncer.child.kill('SIGTERM'); // PgBouncer's immediate shutdown
    await exited;
  }
  await tdb?.drop();
});

/** A free TCP port on the loopback (free when asked: PgBouncer takes it right after). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** A PgBouncer process in transaction mode in front of `serverUrl`'s server, up and answering. */
async function startPgBouncer(serverUrl: string): Promise<{ child: ChildProcess; port: number; log: string }> {
  const u = new URL(serverUrl);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-pgbouncer-'));
  fs.chmodSync(dir, 0o777); // its log, when it runs as nobody (below)
  const user = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  const port = await freePort();
  const log = path.join(dir, 'pgbouncer.log');
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${user}" ""\n`);
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${u.hostname} port=${u.port || 5432} user=${user}${password ? ` password=${password}` : ''}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'default_pool_size = 4',
      'max_client_conn = 200',
      `logfile = ${log}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root.
  const args = process.getuid?.() === 0 ? ['-u', 'nobody', path.join(dir, 'pgbouncer.ini')] : [path.join(dir, 'pgbouncer.ini')];
  const child = spawn(PGBOUNCER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited ${child.exitCode}: ${stderr}${fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : ''}`);
      const client = new Client({ connectionString: `postgres://${u.username}@127.0.0.1:${port}${u.pathname}` });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('select 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    'PgBouncer to answer',
    10_000,
    100,
  );
  return { child, port, log };
}

/** A Db through the pooler, closed in afterAll. */
function bouncerDb(): Db {
  const db = createPgDb({ connectionString: bouncerUrl });
  opened.push(db);
  return db;
}

const droppedNotifies = () => fs.readFileSync(bouncer!.log, 'utf8').split('\n').filter((l) => l.includes(DROPPED_NOTIFY)).length;

/** Waits until every job of `ids` has `status` (read directly). */
const waitForStatus = (ids: string[], status: string, what: string) =>
  waitFor(
    async () => {
      const { rows } = await direct.query<{ n: number }>('select count(*)::int as n from acta.all_jobs where id = any($1) and status = $2', [ids, status]);
      return rows[0].n === ids.length;
    },
    what,
    45_000,
    100,
  );

/** A worker's lines at warn and above, but those `allowed` (by message start). */
const unexpected = (w: WorkerProcess, allowed: string[]): LogLine[] => w.lines.filter((l) => l.level >= 40 && !allowed.some((a) => l.msg.startsWith(a)));

bouncerTest('acta migrate from three processes at once through the pooler: one applies the schema, the others find it applied', async () => {
  const env = { ...process.env, DATABASE_URL: bouncerUrl };
  const runs = await Promise.all([1, 2, 3].map(() => runActa(['migrate'], env)));
  expect(runs.map((r) => r.code)).toEqual([0, 0, 0]);
  expect(runs.filter((r) => /^applied \d+: /.test(r.stdout))).toHaveLength(1);
  expect(runs.filter((r) => r.stdout.startsWith('schema up to date'))).toHaveLength(2);
});

bouncerTest("a named statement whose name another client prepared with another text, on the server connection its Bind lands on: the call runs its own text", async () => {
  const db = createPgDb({ connectionString: bouncerUrl, max: 1 });
  const holder = new Client({ connectionString: bouncerUrl });
  const other = new Client({ connectionString: bouncerUrl });
  try {
    expect((await db.prepared!<{ v: number }>('t_same', 'select 1 as v', [])).rows).toEqual([{ v: 1 }]);
    // The server connection that prepared it is held in a transaction; another client (another
    // acta version) prepares the name with another text on the next one, which the Db's next call,
    // a Bind alone, lands on. Without the digest in the name it answered 2.
    await holder.connect();
    await holder.query('begin');
    await holder.query('select 1');
    await other.connect();
    await other.query({ name: 't_same', text: 'select 2 as v', values: [] });
    expect((await db.prepared!<{ v: number }>('t_same', 'select 1 as v', [])).rows).toEqual([{ v: 1 }]);
  } finally {
    await holder.query('commit').catch(() => undefined);
    await Promise.all([holder.end(), other.end()].map((p) => p.catch(() => undefined)));
    await db.close();
  }
});

bouncerTest('workers through the pooler: one warning each and no LISTEN there; enqueues on a Db and in your transaction, heartbeats and recovery all work', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', '1000', '--safety-poll', '500'];
  const w1 = spawnWorker({ dbUrl: bouncerUrl, events, args });
  const w2 = spawnWorker({ dbUrl: bouncerUrl, events, args });
  // The check NOTIFY did not arrive (4 server connections shared by every client): each worker
  // says so once and stops listening, never issuing LISTEN acta_jobs on a pooled connection.
  await Promise.all([w1, w2].map((w) => w.waitForLog(UNDELIVERED, 30_000)));
  const droppedBefore = droppedNotifies();

  const db = bouncerDb();
  const client = createClient({ db, force: true });
  const ids = [(await client.enqueue('work', { ms: 50 })).id];
  ids.push(...(await client.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ definition: 'work', payload: { ms: 20 + i } })))).map((r) => r.id!));
  const tx = new Client({ connectionString: bouncerUrl }); // your transaction, through the pooler too
  await tx.connect();
  try {
    await tx.query('begin');
    ids.push((await client.enqueue('work', { ms: 10 }, { tx })).id);
    ids.push(...(await client.enqueueMany([{ definition: 'work', payload: {} }, { definition: 'work', payload: {} }], { tx })).map((r) => r.id!));
    await tx.query('commit');
  } finally {
    await tx.end();
  }
  // Longer than the lease (4 H): only renewed leases let it finish in its first attempt.
  const long = (await client.enqueue('work', { ms: 6_000 })).id;
  await waitForStatus([...ids, long], 'succeeded', 'the jobs to succeed through the pooler');
  const { rows: longRuns } = await direct.query<{ n: number }>('select count(*)::int as n from acta.all_executions where job_id = $1', [long]);
  expect(longRuns[0].n).toBe(1);
  expect(droppedNotifies()).toBe(droppedBefore); // 25 enqueues' NOTIFYs reached no pooled server connection

  // A worker killed inside an attempt: the other recovers the job once its lease expires.
  const hung = (await client.enqueue('work', { slowOnExecution: 1, slowMs: 60_000, ms: 50 })).id;
  const started = await waitFor(() => readEvents(events).find((e) => e.jobId === hung && e.event === 'start'), 'the attempt to start');
  const [holder, peer] = started.pid === w1.pid ? [w1, w2] : [w2, w1];
  holder.kill('SIGKILL');
  await waitForStatus([hung], 'succeeded', 'the peer to recover and run the job');
  const { rows: outcomes } = await direct.query<{ outcome: string }>('select outcome from acta.all_executions where job_id = $1 order by execution', [hung]);
  expect(outcomes.map((r) => r.outcome)).toEqual([expect.stringMatching(/^lost/), 'succeeded']); // charged or not: killed before or after its first beat

  // Nothing else worth a warning: no failed named statement, no LISTEN loop.
  expect(peer.lines.filter((l) => l.msg.startsWith(UNDELIVERED))).toHaveLength(1);
  expect(unexpected(peer, [UNDELIVERED, 'recovered jobs whose lease expired'])).toEqual([]);
  expect(peer.lines.filter((l) => l.msg.startsWith('LISTEN connection lost'))).toEqual([]);
  peer.kill('SIGTERM');
  expect((await peer.exited).code).toBe(0);
});

bouncerTest('a worker whose LISTEN has a direct connection (ACTA_LISTEN_URL) is woken, and hears a cancel, at once through the pooler', async () => {
  const events = eventsFile();
  // The safety poll and the heartbeat (45 s) are far away: only NOTIFY starts the job, and aborts it, within 10 s.
  const w = spawnWorker({ dbUrl: bouncerUrl, events, args: ['--safety-poll', '60000'], env: { ACTA_LISTEN_URL: tdb.url } });
  await w.waitForLog('LISTEN connected');
  const env = { ...process.env, DATABASE_URL: bouncerUrl };
  const enqueued = await runActa(['enqueue', 'work', '{"ms":60000}'], env);
  expect(enqueued.code).toBe(0);
  const { id } = JSON.parse(enqueued.stdout) as { id: string };
  await waitFor(() => readEvents(events).find((e) => e.jobId === id && e.event === 'start'), 'the wakeup to start the job', 10_000);
  expect((await runActa(['cancel', id], env)).stdout).toContain('"cancelRequested":true');
  await waitFor(() => readEvents(events).find((e) => e.jobId === id && e.event === 'abort'), 'the cancel to abort the handler', 10_000);
  await waitForStatus([id], 'cancelled', 'the job to end cancelled');
  expect(unexpected(w, [])).toEqual([]);
  w.kill('SIGTERM');
  expect((await w.exited).code).toBe(0);
});

bouncerTest('the CLI and the dashboard through the pooler', async () => {
  const env = { ...process.env, DATABASE_URL: bouncerUrl };
  const { id } = await createClient({ db: bouncerDb(), force: true }).enqueue('work', {}, { runAt: new Date(Date.now() + 3_600_000) });
  for (const args of [['job', id], ['jobs', 'list'], ['workers'], ['namespaces'], ['why', id], ['pause'], ['resume'], ['sql', 'select 1 as one'], ['schedule', 'list']]) {
    const run = await runActa(args, env);
    expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 0, stderr: '' });
  }
  const dashboard = await startDashboard({ db: bouncerDb(), port: 0, logger: silentLogger });
  try {
    for (const page of ['/', '/workers', '/jobs', `/jobs/${id}`, '/alerts', '/schedules']) {
      const res = await fetch(dashboard.url + page);
      expect({ page, status: res.status }).toEqual({ page, status: 200 });
    }
  } finally {
    await dashboard.close();
  }
});
