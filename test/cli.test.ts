// The command line with real processes against a real PostgreSQL (DATABASE_URL in the child's
// environment): migrate, enqueue, and two `acta worker` processes sharing a batch of jobs, each
// stopping with exit code 0 on SIGTERM. Runs the built bin (`npm test` builds first).
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createClient, createWorker, type Db, defineJob } from '../src';
import { withoutPassword } from '../src/db/connect';
import { redisChannel } from '../src/worker/wakeups';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { ROOT, runActa, spawnActa } from './helpers/cli';
import { waitFor } from './helpers/wait';

const FIXTURE = path.join('test', 'fixtures', 'cli-jobs.js');

let tdb: TestDatabase;
let db: Db;
const children: ChildProcess[] = [];

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'ops', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  tdb = await createTestDatabase({ migrate: false });
  db = tdb.open();
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await tdb.drop();
});

const env = () => ({ ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' });

/** Runs `acta <args>` to completion. */
function acta(args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return runActa(args, { ...env(), ...extraEnv });
}

/** Starts `acta worker <fixture>`; resolves its exit code when it exits. */
function startWorker(): { child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; output: () => string } {
  return spawnActa(['worker', FIXTURE, '--heartbeat', '1000', '--executors', '8'], env(), children);
}

/** A localhost TCP port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const net = await import('node:net');
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const count = async (sql: string, params: unknown[] = []) => Number((await db.query<{ n: string }>(sql, params)).rows[0].n);

test('a worker on an unmigrated database exits non-zero, telling to run `npx acta migrate`', async () => {
  const worker = startWorker();
  const { code } = await worker.exited;
  expect(code).toBe(1);
  expect(worker.output()).toMatch(/npx acta migrate/);
});

test('a command on an unmigrated database names the database it read (before: not which, so DATABASE_URL left unset in a new shell read as "migrate", on a PGlite folder made in the current one)', async () => {
  const target = withoutPassword(tdb.url);
  expect(await acta(['job', '1'])).toEqual({ code: 1, stdout: '', stderr: `acta: the acta schema is not migrated (no acta.migrations table): run \`npx acta migrate\` (or \`migrate(db)\`) first (the database: ${target})\n` });
});

test('`acta worker` with an unreachable database (a closed port) logs it at once and exits 1 after --start-timeout, with one clear line', async () => {
  const closed = await closedPort();
  const run = await acta(['worker', FIXTURE, '--start-timeout', '2000'], { DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/test` });
  expect(run.code).toBe(1);
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  expect(lines.filter((l) => l.startsWith('acta: '))).toEqual([
    expect.stringMatching(/^acta: the worker could not reach the database within 2000 ms of its start \(last error: connect ECONNREFUSED 127\.0\.0\.1:\d+\); check the database address/),
  ]);
  // Said at once (the first failure, a warn with the error), before the give-up.
  const logged = (run.stdout + run.stderr).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; time: number });
  expect(logged[0]).toMatchObject({ level: 40, msg: expect.stringMatching(/^worker start: the database has not been reached since the start/) });
  // Then repeated until the give-up (its timing: test/startTimeout.spec.ts, in virtual time).
  expect(logged.findIndex((l) => l.level === 50)).toBeGreaterThan(0);
});

test('`acta migrate` applies the schema, and a second run applies nothing', async () => {
  const first = await acta(['migrate']);
  expect(first).toMatchObject({ code: 0, stderr: '' });
  expect(first.stdout).toMatch(/^applied \d+: migrations\/0001_core\.sql/);
  const second = await acta(['migrate']);
  expect(second.code).toBe(0);
  expect(second.stdout).toMatch(/^schema up to date \(postgres:\/\/.*\)\n$/);
});

test('`acta enqueue` refuses a definition no worker has declared in the namespace, listing those declared and pointing to --force; --force enqueues it', async () => {
  const jobs = () => count('select count(*) as n from acta.jobs');
  // A brand new database: no worker has declared anything yet (the job would wait forever).
  const fresh = await acta(['enqueue', 'cli-echo', '{}']);
  expect(fresh).toMatchObject({ code: 1, stdout: '' });
  expect(fresh.stderr).toMatch(/^acta: no worker has declared any job definition in namespace "default" yet \(a worker declares its definitions when it starts\), so none runs "cli-echo"; start its worker first, or to enqueue it anyway \(a definition whose worker has not started yet\): --force\n$/);
  expect(await jobs()).toBe(0);

  // A worker declares its definitions as it starts (acta.register_worker); they stay declared after it stops.
  const worker = startWorker();
  await waitFor(async () => (await count(`select count(*) as n from acta.workers where status = 'alive'`)) === 1, 'the worker to register', 30_000);
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  await db.query('delete from acta.workers'); // the two-worker test counts its own rows

  const typo = await acta(['enqueue', 'cli-ehco', '{}']);
  expect(typo).toMatchObject({ code: 1, stdout: '' });
  expect(typo.stderr).toBe('acta: no worker has declared a job definition named "cli-ehco" in namespace "default"; declared there: "cli-echo"; to enqueue it anyway (a definition whose worker has not started yet): --force\n');
  // The wrong namespace: the one that has the name is named.
  const elsewhere = await acta(['enqueue', 'cli-echo', '{}', '--namespace', 'cli-other']);
  expect(elsewhere).toMatchObject({ code: 1, stdout: '' });
  expect(elsewhere.stderr).toMatch(/^acta: no worker has declared any job definition in namespace "cli-other" yet .*; "cli-echo" is declared in namespace "default" \(--namespace "default"\); .*--force\n$/);
  expect(await jobs()).toBe(0);

  const forced = await acta(['enqueue', 'cli-ehco', '{"n":1}', '--force', '--namespace', 'cli-other']);
  expect(forced).toMatchObject({ code: 0, stderr: '' });
  const { id } = JSON.parse(forced.stdout) as { id: string };
  expect((await db.query('select namespace, definition, status from acta.jobs where id = $1', [id])).rows).toEqual([{ namespace: 'cli-other', definition: 'cli-ehco', status: 'ready' }]);
  // --definitions names the list to check instead; with --force it is a contradiction.
  const both = await acta(['enqueue', 'cli-ehco', '{}', '--force', '--definitions', FIXTURE]);
  expect(both).toMatchObject({ code: 1, stdout: '' });
  expect(both.stderr).toMatch(/option '--force' cannot be used with option '--definitions <module>'/);
  expect(await jobs()).toBe(1);
  await db.query('delete from acta.jobs'); // the next tests count from an empty table
  expect((await acta(['enqueue', '--help'])).stdout).toMatch(/--force +enqueue a definition name no worker has declared/);
}, 60_000);

test('`acta enqueue` prints {"id","created"}; an idempotency key repeats the id; bad JSON exits non-zero with a clear message', async () => {
  const first = await acta(['enqueue', 'cli-echo', '{"hello":"world","n":[1,2]}', '--priority', '3', '--idempotency-key', 'cli-1']);
  expect(first.code).toBe(0);
  const printed = JSON.parse(first.stdout);
  expect(printed).toEqual({ id: expect.stringMatching(/^\d+$/), created: true });
  const { rows } = await db.query('select definition, payload, priority, status from acta.jobs where id = $1', [printed.id]);
  expect(rows).toEqual([{ definition: 'cli-echo', payload: { hello: 'world', n: [1, 2] }, priority: 3, status: 'ready' }]);

  const again = await acta(['enqueue', 'cli-echo', '{}', '--idempotency-key', 'cli-1']);
  expect(JSON.parse(again.stdout)).toEqual({ id: printed.id, created: false });

  const bad = await acta(['enqueue', 'cli-echo', '{not json']);
  expect(bad.code).not.toBe(0);
  expect(bad.stdout).toBe('');
  expect(bad.stderr).toMatch(/not JSON/);
  expect(bad.stderr).not.toMatch(/^\s+at /m); // a message, not a stack trace
  expect(bad.stderr).toMatch(/^acta: payload is not JSON: /);
  expect(await count('select count(*) as n from acta.jobs')).toBe(1);
});

test('a JSON argument with a number that JavaScript would store as another (past 2^53, past a double\'s digits or range) is refused naming its path, for enqueue, signal, publish and schedule add --payload; nothing written (before: stored rounded, 12345678901234567000)', async () => {
  const before = await count('select count(*) as n from acta.jobs');
  const refused = await acta(['enqueue', 'cli-echo', '{"order":{"ids":[1,12345678901234567890]}}', '--force']);
  expect(refused).toEqual({
    code: 1,
    stdout: '',
    stderr: 'acta: value at $.order.ids[1] cannot be stored as jsonb: the number 12345678901234567890 would be stored as 12345678901234567000 (a JavaScript number, as acta and its workers read JSON, cannot hold it): give it as a string, "12345678901234567890"\n',
  });
  // [args, path, the number, what it would have been stored as]
  for (const [args, at, token, stored] of [
    [['signal', '1', 'go', '{"n":9007199254740993}'], '$.n', '9007199254740993', '9007199254740992'],
    [['enqueue', 'cli-echo', '{"b":1152921504606846976}', '--force'], '$.b', '1152921504606846976', '1152921504606847000'], // 2^60: a double, written back rounded
    [['publish', 'topic', '[{},"x",1e400]'], '$[2]', '1e400', 'null'],
    [['schedule', 'add', 'cli-echo', '* * * * *', '--payload', '{"a b":{"pi":3.14159265358979323846}}', '--force'], '$["a b"].pi', '3.14159265358979323846', '3.141592653589793'],
  ] as const) {
    const out = await acta([...args]);
    expect({ args, ...out }).toEqual({ args, code: 1, stdout: '', stderr: `acta: value at ${at} cannot be stored as jsonb: the number ${token} would be stored as ${stored} (a JavaScript number, as acta and its workers read JSON, cannot hold it): give it as a string, "${token}"\n` });
  }
  expect(await count('select count(*) as n from acta.jobs')).toBe(before);
  expect(await count('select count(*) as n from acta.schedules')).toBe(0);
  // Exact ones pass: 2^53, 1.0, -0, 0.1, 1e-7, 2.5E+3; digits in a string or a key, after an escaped quote, are no number.
  const exact = await acta(['enqueue', 'cli-echo', '{"a":9007199254740992,"c":1.0,"d":-0,"e":0.1,"f":1e-7,"g":2.5E+3,"s":"12345678901234567890","q\\"1e400":["\\"",[]]}', '--force']);
  expect(exact).toMatchObject({ code: 0, stderr: '' });
  const { id } = JSON.parse(exact.stdout) as { id: string };
  expect((await db.query('select payload::text as p from acta.jobs where id = $1', [id])).rows[0].p).toBe('{"a": 9007199254740992, "c": 1, "d": 0, "e": 0.1, "f": 0.0000001, "g": 2500, "s": "12345678901234567890", "q\\"1e400": ["\\"", []]}');
  await db.query('delete from acta.jobs where id = $1', [id]);
});

test('`acta sql` prints each row as a JSON line, on the server and on embedded PGlite; a bad statement exits 1 with its message', async () => {
  const jobs = await acta(['sql', 'select definition, payload, status from acta.jobs order by id']);
  expect(jobs).toMatchObject({ code: 0, stderr: '' });
  expect(jobs.stdout.trim().split('\n').map((line) => JSON.parse(line))).toEqual([{ definition: 'cli-echo', payload: { hello: 'world', n: [1, 2] }, status: 'ready' }]);

  // Several statements: the last one's rows, as on PGlite (it failed with "rows is not iterable").
  expect(await acta(['sql', "select 1 as a; select 'two' as b"])).toMatchObject({ code: 0, stdout: '{"b":"two"}\n' });

  const bad = await acta(['sql', 'select * from no_such_table']);
  expect(bad.code).toBe(1);
  expect(bad.stdout).toBe('');
  expect(bad.stderr).toMatch(/^acta: relation "no_such_table" does not exist/);

  // The embedded default: the case psql cannot reach.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-cli-sql-'));
  try {
    const pglite = { DATABASE_URL: '', ACTA_DATA_DIR: dataDir };
    expect((await acta(['migrate'], pglite)).code).toBe(0);
    // A brand new database: refused, saying so, until --force.
    const refused = await acta(['enqueue', 'in-pglite', '{"n":1}'], pglite);
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toMatch(/^acta: no worker has declared any job definition in namespace "default" yet .*--force\n$/);
    expect((await acta(['enqueue', 'in-pglite', '{"n":1}', '--force'], pglite)).code).toBe(0);
    const counted = await acta(['sql', 'select status, count(*)::int as n from acta.jobs group by status'], pglite);
    expect(counted).toMatchObject({ code: 0, stdout: '{"status":"ready","n":1}\n' });
    expect(await acta(['sql', "select 1 as a; select 'two' as b"], pglite)).toMatchObject({ code: 0, stdout: '{"b":"two"}\n' });
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

test('`acta sql` and `acta migrate` take --deadline <s> (default 300 and 3600 s; 0: none); a bad value is refused before anything connects', async () => {
  expect(await acta(['sql', 'select 2 as n', '--deadline', '5'])).toMatchObject({ code: 0, stdout: '{"n":2}\n', stderr: '' });
  expect(await acta(['sql', 'select 2 as n', '--deadline', '0'])).toMatchObject({ code: 0, stdout: '{"n":2}\n', stderr: '' });
  expect(await acta(['migrate', '--deadline', '60'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^schema up to date /), stderr: '' });
  // The help wraps its lines at 80 columns.
  expect((await acta(['sql', '--help'])).stdout.replace(/\s+/g, ' ')).toContain('--deadline <s> the statement must be answered within this many seconds, else the command fails (0: no deadline) (default: 300)');
  expect((await acta(['migrate', '--help'])).stdout.replace(/\s+/g, ' ')).toContain('--deadline <s> the whole migrate (one transaction) must be answered within this many seconds, else the command fails (0: no deadline) (default: 3600)');
  const nowhere = { DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/none` };
  // Decimal digits only: '1e3' and '0x10' are typos, not 1000 and 16.
  for (const [args, value] of [[['sql', 'select 1'], '-1'], [['migrate'], '1.5'], [['migrate'], ''], [['migrate'], '1e3'], [['sql', 'select 1'], '0x10']] as const) {
    const refused = await acta([...args, '--deadline', value], nowhere);
    expect([refused.code, refused.stdout, refused.stderr]).toEqual([1, '', expect.stringMatching(new RegExp(`^error: option '--deadline <s>' argument '${value.replace('.', '\\.')}' is invalid\\. must be an integer between 0 and 2147483\\.`))]);
  }
});

test('`acta sql` past its --deadline on a server still running the statement cancels it there and says so, not that the database was not reached (the silent network\'s case: test/faults/partition.test.ts); a write in it is rolled back, and so is an `acta migrate`', async () => {
  // The backends of this test's database running pg_sleep, the asking one aside.
  const sleeping = () => count("select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%pg_sleep%'");
  const slow = await acta(['sql', 'select pg_sleep(30)', '--deadline', '1']);
  expect(slow.code).toBe(1);
  expect(slow.stderr).toMatch(/^acta: the statement was still running on the database after 1000 ms: its connection was dropped, and it was cancelled there \(nothing of it committed\); a longer statement needs a larger --deadline <s> \(now 1\) \(the database: postgres:\/\/.*\)\n$/);
  expect(slow.stderr).not.toContain('was not reached');
  expect(await sleeping()).toBe(0);

  await db.query('create table cli_deadline_scratch (x int)');
  try {
    const write = await acta(['sql', 'insert into cli_deadline_scratch values (1); select pg_sleep(5)', '--deadline', '1']);
    expect(write.code).toBe(1);
    expect(write.stderr).toContain('it was cancelled there (nothing of it committed)');
    expect(await sleeping()).toBe(0);
    expect(await count('select count(*) as n from cli_deadline_scratch')).toBe(0);
  } finally {
    await db.query('drop table cli_deadline_scratch');
  }

  // `acta migrate` waiting past its --deadline for another migrate's lock: cancelled, its transaction rolled back.
  const { MIGRATION_LOCK_KEY } = await import('../src/db/migrator');
  await db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    const migrate = await acta(['migrate', '--deadline', '1']);
    expect(migrate.code).toBe(1);
    expect(migrate.stderr).toContain('it was cancelled there (nothing of it committed); it commits all or nothing, so acta migrate again is safe');
    expect(await count("select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%pg_advisory_xact_lock%'")).toBe(0);
  });
});

test('`acta job <id>` prints the job as JSON (client.getJob), `acta cancel <id>` cancels a Ready one; another namespace\'s job, a malformed id, a job not Ready: exit 1 with a message', async () => {
  const enqueued = await acta(['enqueue', 'cli-echo', '{"look":"here"}', '--namespace', 'cli-job', '--max-attempts', '2', '--force']); // no worker in cli-job
  expect(enqueued.code).toBe(0);
  const { id } = JSON.parse(enqueued.stdout) as { id: string };
  const shown = await acta(['job', id, '--namespace', 'cli-job']);
  expect(shown).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(shown.stdout)).toMatchObject({ id, definition: 'cli-echo', status: 'ready', payload: { look: 'here' }, maxAttempts: 2, effectiveMaxAttempts: 2, maxAttemptsFrom: 'job', attempts: 0, executions: [] });
  expect(new Date(JSON.parse(shown.stdout).createdAt).getTime()).toBeGreaterThan(0);

  const elsewhere = await acta(['job', id]); // the default namespace has no such job
  expect(elsewhere).toMatchObject({ code: 1, stdout: '' });
  expect(elsewhere.stderr).toBe(`acta: no job ${id} in namespace "default"\n`);
  // A DATABASE_URL that is not a URL: pg dialled a host named "base". Not echoed: it may hold a password.
  // Nor one whose // was forgotten: pg took "secret@127.0.0.1:5432/x" for the database name, and printed it.
  for (const url of ['not-a-url-secret', 'postgres:secret@127.0.0.1:5432/x', '//secret@127.0.0.1/x', '?sslmode=disable&password=secret']) {
    const notUrl = await acta(['job', id], { DATABASE_URL: url });
    expect(notUrl).toMatchObject({ code: 1, stdout: '' });
    expect(notUrl.stderr).toMatch(/^acta: the connection string \(DATABASE_URL.*\) is not a URL/);
    expect(notUrl.stderr).not.toContain('secret');
  }
  const bad = await acta(['job', 'twelve']);
  expect(bad).toMatchObject({ code: 1, stdout: '' });
  expect(bad.stderr).toMatch(/^acta: a job id is a positive integer/);

  // `acta cancel`: a Ready job once; then it says why not.
  expect(await acta(['cancel', id, '--namespace', 'cli-job'])).toEqual({ code: 0, stdout: '{"cancelled":true}\n', stderr: '' });
  expect(await acta(['cancel', id, '--namespace', 'cli-job'])).toEqual({ code: 1, stdout: '', stderr: `acta: job ${id} is cancelled: it has finished\n` });
  expect(await acta(['cancel', id])).toEqual({ code: 1, stdout: '', stderr: `acta: no job ${id} in namespace "default"\n` });
  expect(JSON.parse((await acta(['job', id, '--namespace', 'cli-job'])).stdout)).toMatchObject({ status: 'cancelled' });
});

test('`acta --version` names the package version and the SQL functions\' revision', async () => {
  // Before it, there was no way to tell which acta is installed.
  const { loadFunctionsLock } = await import('../src/db/migrator');
  const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const result = await acta(['--version']);
  expect(result).toEqual({ code: 0, stdout: `acta ${version} (SQL functions revision ${loadFunctionsLock().revision})\n`, stderr: '' });
});

test('`acta enqueue --definitions <module>` refuses a name the module does not define, listing those it does, writing nothing', async () => {
  const before = await count('select count(*) as n from acta.jobs');
  const unknown = await acta(['enqueue', 'cli-ehco', '{}', '--definitions', FIXTURE]);
  expect(unknown.code).toBe(1);
  expect(unknown.stdout).toBe('');
  expect(unknown.stderr).toMatch(/^acta: no job definition named "cli-ehco"; known: "cli-echo"/); // the names there are, for a typo
  expect(await count('select count(*) as n from acta.jobs')).toBe(before);
  const known = await acta(['enqueue', 'cli-echo', '{"k":1}', '--definitions', FIXTURE]);
  expect(known.code).toBe(0);
  const { id } = JSON.parse(known.stdout) as { id: string };
  expect(await count('select count(*) as n from acta.jobs where id = $1', [id])).toBe(1);
  // The module is the list checked, instead of the names workers declared: none in this namespace.
  const undeclared = await acta(['enqueue', 'cli-echo', '{"k":2}', '--definitions', FIXTURE, '--namespace', 'cli-module']);
  expect(undeclared).toMatchObject({ code: 0, stderr: '' });
  // cleaned up so the next test's counts start from what they expect
  await db.query('delete from acta.jobs where id = any($1::bigint[])', [[id, JSON.parse(undeclared.stdout).id]]);
});

test('two `acta worker` processes share a batch of jobs, each job succeeds once, and SIGTERM makes each exit 0', async () => {
  // Its jobs succeed into acta.succeeded_jobs (no parent, watch, schedule or key), and their last
  // attempts are recorded there: read through acta.all_jobs and acta.all_executions.
  await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions');
  const workers = [startWorker(), startWorker()];
  await waitFor(async () => (await count(`select count(*) as n from acta.workers where status = 'alive'`)) === 2, 'both workers to register', 30_000);
  const JOBS = 500;
  await createClient({ db }).enqueueMany(Array.from({ length: JOBS }, (_, i) => ({ definition: 'cli-echo', payload: { i } })));
  try {
    await waitFor(async () => (await count(`select count(*) as n from acta.all_jobs where status = 'succeeded'`)) === JOBS, 'every job to succeed', 40_000, 100);
  } catch (err) {
    const { rows } = await db.query('select status, count(*) as n from acta.all_jobs group by status');
    throw new Error(`${(err as Error).message}\njobs: ${JSON.stringify(rows)}\n${workers.map((w) => w.output().slice(-3000)).join('\n---\n')}`);
  }

  for (const w of workers) w.child.kill('SIGTERM');
  const exits = await Promise.all(workers.map((w) => w.exited));
  expect(exits).toEqual([
    { code: 0, signal: null },
    { code: 0, signal: null },
  ]);

  expect(await count(`select count(*) as n from acta.all_jobs where status = 'succeeded' and execution = 1 and attempts = 1`)).toBe(JOBS);
  const { rows: perJob } = await db.query<{ n: string; jobs: string }>(
    'select n, count(*) as jobs from (select job_id, count(*) as n from acta.all_executions group by job_id) per group by n',
  );
  expect(perJob).toEqual([{ n: '1', jobs: String(JOBS) }]);
  // Both processes did some of the work: as the ledger says (worker ids) and as the results say (pids).
  const { rows: byWorker } = await db.query<{ worker_id: string; n: string }>('select worker_id, count(*) as n from acta.all_executions group by worker_id');
  expect(byWorker).toHaveLength(2);
  const { rows: registered } = await db.query<{ id: string; pid: number; status: string }>('select id, pid, status from acta.workers order by pid');
  expect(registered.map((r) => r.status)).toEqual(['stopped', 'stopped']);
  expect(registered.map((r) => r.pid).sort()).toEqual(workers.map((w) => w.child.pid).sort());
  expect(byWorker.map((r) => r.worker_id).sort()).toEqual(registered.map((r) => r.id).sort());
  const { rows: byPid } = await db.query<{ pid: number; n: string }>(`select (result->>'pid')::int as pid, count(*) as n from acta.all_jobs group by 1`);
  expect(byPid.map((r) => r.pid).sort()).toEqual(workers.map((w) => w.child.pid).sort());
  const { rows: sample } = await db.query(`select payload, result->'payload' as echoed from acta.all_jobs where (payload->>'i')::int in (0, 499) order by id`);
  expect(sample).toEqual([
    { payload: { i: 0 }, echoed: { i: 0 } },
    { payload: { i: 499 }, echoed: { i: 499 } },
  ]);
});

test('an option out of range is refused, naming the flag and its range', async () => {
  const executors = await acta(['worker', FIXTURE, '--executors', '0']);
  expect(executors.code).toBe(1);
  expect(executors.stderr).toMatch(/option '--executors <n>' argument '0' is invalid\. must be an integer between 1 and 10000\./);
  const heartbeat = await acta(['worker', FIXTURE, '--heartbeat', '5']);
  expect(heartbeat.code).toBe(1);
  expect(heartbeat.stderr).toMatch(/option '--heartbeat <ms>' argument '5' is invalid\. must be an integer between 100 and 3600000\./);
  const attempts = await acta(['enqueue', 'cli-echo', '{}', '--max-attempts', '0']);
  expect(attempts.code).toBe(1);
  expect(attempts.stderr).toMatch(/option '--max-attempts <n>' argument '0' is invalid\. must be an integer between 1 and 2147483647\./);
  expect(attempts.stdout).toBe('');
  // Named the API option ("runAt must be a valid Date") and pino's internals before.
  const runAt = await acta(['enqueue', 'cli-echo', '{}', '--run-at', 'tomorrow']);
  expect(runAt.code).toBe(1);
  expect(runAt.stderr).toMatch(/option '--run-at <iso>' argument 'tomorrow' is invalid\. must be an ISO 8601 date/);
  expect(runAt.stdout).toBe('');
  // Without an offset the zone would be a guess (local for a date-time, UTC for a date alone): refused.
  for (const value of ['2027-01-01T00:00:00', '2027-01-01']) {
    const noOffset = await acta(['enqueue', 'cli-echo', '{}', '--run-at', value]);
    expect([noOffset.code, noOffset.stdout]).toEqual([1, '']);
    expect(noOffset.stderr).toContain(`option '--run-at <iso>' argument '${value}' is invalid. must be an ISO 8601 date-time with its offset`);
  }
  // An unset $REDIS_URL: ioredis would use 127.0.0.1:6379 without a word; a URL that does not parse said "Invalid URL" without the flag.
  const emptyRedis = await acta(['worker', FIXTURE, '--redis', '']);
  expect([emptyRedis.code, emptyRedis.stderr]).toEqual([1, expect.stringMatching(/option '--redis <url>' argument '' is invalid\. must not be empty\./)]);
  const badRedis = await acta(['worker', FIXTURE, '--redis', 'redis://[::1']);
  expect([badRedis.code, badRedis.stderr]).toEqual([1, expect.stringMatching(/option '--redis <url>' argument 'redis:\/\/\[::1' is invalid\. is not a valid URL\./)]);
  // host:port with a port that is no number: ioredis reads it as redis://<it> and throws "Invalid URL", which came after
  // `acta worker` had connected and after `acta enqueue` had written its job.
  for (const args of [['worker', FIXTURE], ['enqueue', 'cli-echo', '{}', '--force']]) {
    const typo = await acta([...args, '--redis', '127.0.0.1:abc']);
    expect([typo.code, typo.stdout, typo.stderr]).toEqual([1, '', expect.stringMatching(/option '--redis <url>' argument '127\.0\.0\.1:abc' is invalid\. is not a valid URL\./)]);
  }
  // Refused by the parser, before anything connects: a timer past 2^31 - 1 ms, an empty number, an empty namespace.
  const poll = await acta(['worker', FIXTURE, '--safety-poll', '3000000000']);
  expect([poll.code, poll.stderr]).toEqual([1, expect.stringMatching(/option '--safety-poll <ms>' argument '3000000000' is invalid\. must be an integer between 1 and 2147483647\./)]);
  const empty = await acta(['enqueue', 'cli-echo', '{}', '--priority', '']);
  expect([empty.code, empty.stdout, empty.stderr]).toEqual([1, '', expect.stringMatching(/option '--priority <n>' argument '' is invalid\. must be an integer between/)]);
  for (const args of [['enqueue', 'cli-echo', '{}'], ['jobs', 'list'], ['schedule', 'list'], ['signal', '1', 'go']]) {
    const ns = await acta([...args, '--namespace', '']);
    expect([ns.code, ns.stdout, ns.stderr]).toEqual([1, '', expect.stringMatching(/option '--namespace <name>' argument '' is invalid\. must be a non-empty string/)]);
  }
  const onAlert = await acta(['worker', FIXTURE, '--on-alert', 'pager']);
  expect([onAlert.code, onAlert.stderr]).toEqual([1, expect.stringContaining('--on-alert goes with --alerts')]);
  const build = await acta(['worker', FIXTURE, '--build', '']);
  expect([build.code, build.stderr]).toEqual([1, expect.stringMatching(/option '--build <id>' argument '' is invalid\. must be a non-empty string/)]);
  const level = await acta(['worker', FIXTURE], { ACTA_LOG_LEVEL: 'bogus' });
  expect(level.code).toBe(1);
  expect(level.stderr).toMatch(/^acta: log level \(ACTA_LOG_LEVEL or level\) must be one of trace, debug, info, warn, error, fatal, silent, got "bogus"\n$/);
});

test('`acta worker` with a missing module or a TypeScript file says so plainly and exits 1', async () => {
  const missing = await acta(['worker', 'test/fixtures/does-not-exist.js']);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/^acta: no module at .*does-not-exist\.js\n$/);
  // A module that exists but requires a package that is not installed: the missing package is named.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-cli-'));
  const needsPackage = path.join(dir, 'needs-package.js');
  fs.writeFileSync(needsPackage, "require('acta-no-such-package'); module.exports = [];\n");
  const dependency = await acta(['worker', needsPackage]);
  expect(dependency.code).toBe(1);
  expect(dependency.stderr).toContain("Cannot find module 'acta-no-such-package'");
  expect(dependency.stderr).not.toContain('no module at');
  // A module that throws as it loads (its own bug, a setting it lacks): said to be the module's,
  // not printed as if acta had failed ("acta: The "id" argument must be of type string", once).
  const throws = path.join(dir, 'throws.js');
  fs.writeFileSync(throws, "throw new Error('PAYMENTS_KEY is not set');\n");
  const thrown = await acta(['worker', throws]);
  expect(thrown.code).toBe(1);
  expect(thrown.stderr).toMatch(/^acta: loading .*throws\.js failed: PAYMENTS_KEY is not set \(set ACTA_DEBUG=1 for the stack\)\n$/);
  fs.rmSync(dir, { recursive: true, force: true });
  const ts = await acta(['worker', 'examples/hashFile.ts']);
  expect(ts.code).toBe(1);
  expect(ts.stderr).toContain('is TypeScript: compile it and give the .js file');
});

test('`acta enqueue --redis` publishes one wakeup on the namespace\'s channel; an unreachable Redis is reported, exit 1, with the job enqueued', async () => {
  const url = process.env.ACTA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const sub = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await sub.connect();
  } catch (err) {
    if (process.env.CI) throw err;
    console.warn(`skipping the Redis half of this test: no Redis at ${url} (${(err as Error).message}); CI always runs it`);
    sub.disconnect();
    return;
  }
  try {
    const got: string[] = [];
    sub.on('message', (channel: string) => got.push(channel));
    await sub.subscribe(redisChannel('cli-redis'));
    const sent = await acta(['enqueue', 'cli-echo', '{}', '--namespace', 'cli-redis', '--force', '--redis', url]);
    expect(sent.code).toBe(0);
    await waitFor(() => got.length > 0 || undefined, 'the wakeup to arrive', 5_000);
    expect(got).toEqual([redisChannel('cli-redis')]);

    const failed = await acta(['enqueue', 'cli-echo', '{}', '--namespace', 'cli-redis', '--force', '--redis', 'redis://127.0.0.1:1']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^acta: the job is enqueued, but the Redis wakeup failed/);
    const { id } = JSON.parse(failed.stdout);
    expect(await count('select count(*) as n from acta.jobs where id = $1', [id])).toBe(1);
  } finally {
    sub.disconnect();
  }
});

test('`acta enqueue` of a definition declared with policies needs its keys: --definitions computes them, or --concurrency-key / --rate-key / --lane give them; else exit 1 (the job would have no key, so no limit), writing nothing', async () => {
  const handler = async () => undefined;
  type Order = { tenant: string; order: string };
  const keyed = defineJob({ name: 'cli-keyed', handler, concurrency: { key: (p: Order) => p.tenant, limit: 1 }, lane: (p: Order) => p.order });
  // A worker declares the policies as it starts.
  const worker = createWorker({ db, definitions: [keyed], namespace: 'cli-keys', logger: pino({ level: 'silent' }) });
  await worker.start();
  await worker.stop();
  const before = await count('select count(*) as n from acta.jobs');
  const refused = await acta(['enqueue', 'cli-keyed', '{"tenant":"a","order":"o1"}', '--namespace', 'cli-keys']);
  expect(refused).toMatchObject({ code: 1, stdout: '' });
  expect(refused.stderr).toBe(
    'acta: definition "cli-keyed" declares concurrency, lane policy: its jobs need keys, which its key functions compute from the payload; pass --definitions <the worker\'s module> to compute them, or --concurrency-key, --lane\n',
  );
  expect(await count('select count(*) as n from acta.jobs')).toBe(before);
  // A key for a policy it does not declare is refused as well: it would limit nothing of its own.
  expect(await acta(['enqueue', 'cli-keyed', '{}', '--namespace', 'cli-keys', '--concurrency-key', 'a', '--lane', 'o1', '--rate-key', 'api'])).toMatchObject({
    code: 1,
    stderr: 'acta: definition "cli-keyed" declares no rate policy: --rate-key would limit nothing of its own (and join another definition\'s limit or meter of that key); leave it out\n',
  });
  expect(await count('select count(*) as n from acta.jobs')).toBe(before);
  const given = await acta(['enqueue', 'cli-keyed', '{}', '--namespace', 'cli-keys', '--concurrency-key', 'a', '--lane', 'o1']);
  expect(given).toMatchObject({ code: 0, stderr: '' });
  const { id } = JSON.parse(given.stdout) as { id: string };
  expect(await createClient({ db, namespace: 'cli-keys' }).getJob(id)).toMatchObject({ concurrencyKey: 'a', lane: 'o1', rateKey: null });
  await db.query('delete from acta.jobs where id = $1', [id]);
});

test('the operating commands: pause, why, jobs list|cancel|delete|retry, workers, namespaces, resume; tables for people, --json one object per line', async () => {
  const ns = ['--namespace', 'cli-ops'];
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(JSON.parse((await acta(['enqueue', 'cli-op', `{"i":${i}}`, '--force', ...ns])).stdout).id as string);
  // No worker has declared a definition in cli-ops: its pause needs --force.
  const paused = await acta(['pause', '--reason', 'maintenance', '--by', 'ops-team', '--force', ...ns]);
  expect(paused).toMatchObject({ code: 0, stderr: '' });
  expect(paused.stdout).toMatch(/^paused: namespace "cli-ops" by ops-team since \S+ \(maintenance\)\n$/);
  const why = await acta(['why', ids[0], ...ns]);
  expect(why.code).toBe(0);
  expect(why.stdout).toContain(`job ${ids[0]}: ready\n  paused: namespace "cli-ops" paused by ops-team since`);
  expect(why.stdout).toContain('no-worker: no live worker in namespace "cli-ops"');
  expect(JSON.parse((await acta(['why', ids[0], '--json', ...ns])).stdout).reasons[0]).toMatchObject({ cause: 'paused' });
  expect(await acta(['why', '999999', ...ns])).toMatchObject({ code: 1, stderr: 'acta: no job 999999 in namespace "cli-ops"\n' });

  const listed = await acta(['jobs', 'list', '--json', '--limit', '2', ...ns]);
  const lines = listed.stdout.trim().split('\n').map((l) => JSON.parse(l));
  expect(lines.map((l) => l.id ?? l.nextCursor)).toEqual([ids[2], ids[1], ids[1]]);
  const table = await acta(['jobs', 'list', '--status', 'ready', ...ns]);
  expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+DEFINITION\s+STATUS\s+ATTEMPTS/);
  expect(table.stdout).toContain(`${ids[0]}`);
  // ATTEMPTS: the count of the limit that applies (no limit of its own, no definition declared: 25).
  expect(table.stdout).not.toContain('/-');
  expect(table.stdout.split('\n').find((l) => l.startsWith(`${ids[1]} `))).toMatch(/ ready +0\/25 /);

  // An id as typed with leading zeros is the same job, not reported unchanged.
  expect(JSON.parse((await acta(['jobs', 'cancel', `00${ids[0]}`, '--json', ...ns])).stdout)).toEqual({ cancelled: [ids[0]], requested: [], unchanged: [], reasons: [] });
  // An id not changed: its status and the rule, or no such job (in this namespace), each on its line.
  expect(await acta(['jobs', 'retry', ids[1], ids[0], '999999', ...ns])).toMatchObject({
    code: 1,
    stdout: `retried: 1 (${ids[0]})\n`,
    stderr: `acta: jobs retry: job ${ids[1]} is ready: only Failed or Cancelled jobs are retried\nacta: jobs retry: no job 999999 in namespace "cli-ops"\n`,
  });
  expect((await acta(['jobs', 'cancel', ids[0], ...ns])).stderr).toBe('');
  // A job id past bigint is no such job: not a raw database error.
  expect(await acta(['signal', '9999999999999999999', 'go', ...ns])).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('not delivered to job 9999999999999999999: no job 9999999999999999999 in namespace "cli-ops" (not_found)') });
  // By idempotency key: the key is named as a key, not as a job id.
  expect(await acta(['signal', '--key', 'no-such-key', 'go', ...ns])).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('not delivered to the job of idempotency key "no-such-key": no job of idempotency key "no-such-key" in namespace "cli-ops" (not_found)') });
  // A schedule name that does not exist: exit 1 with a line (not an empty listing).
  expect(await acta(['schedule', 'list', 'nope', ...ns])).toMatchObject({ code: 1, stdout: '', stderr: 'acta: no schedule "nope" in namespace "cli-ops"\n' });
  expect(JSON.parse((await acta(['jobs', 'delete', '--status', 'cancelled', '--json', ...ns])).stdout)).toEqual({ deleted: [ids[0]] });
  const refused = await acta(['jobs', 'retry', ...ns]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/give job ids, or at least one filter option/);
  expect((await acta(['jobs', 'list', '--status', 'done', ...ns])).stderr).toMatch(/--status <list>.*must be a comma-separated list/);

  const spaces = (await acta(['namespaces', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
  expect(spaces.find((n) => n.name === 'cli-ops')).toMatchObject({ counts: { ready: 2, cancelled: 0 }, pauses: [{ definition: null, pausedBy: 'ops-team', reason: 'maintenance' }] });
  expect((await acta(['workers', ...ns])).stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+HOST/);
  // A parent's cancel cancels its unfinished children (docs/workflows.md): the help says so.
  expect((await acta(['cancel', '--help'])).stdout.replace(/\s+/g, ' ')).toContain("a parent's unfinished child jobs are cancelled with it, recursively");
  expect((await acta(['jobs', 'cancel', '--help'])).stdout.replace(/\s+/g, ' ')).toContain("a parent's unfinished child jobs are cancelled with it (not listed)");
  expect(await acta(['resume', ...ns])).toMatchObject({ code: 0, stdout: 'resumed\n' });
  expect(await acta(['resume', '--json', ...ns])).toMatchObject({ code: 0, stdout: '{"resumed":false}\n' });
}, 240_000);

test('acta pause refuses a scope no worker has declared (a typo pauses nothing), naming what is declared; --force pauses it', async () => {
  // A worker declares its definitions as it starts; they stay declared after it stops.
  const declaring = createWorker({ db, definitions: [defineJob({ name: 'cli-pause-job', handler: () => undefined })], namespace: 'cli-pause', logger: pino({ level: 'silent' }) });
  await declaring.start();
  await declaring.stop();
  const pauses = async () => (await db.query(`select namespace, definition from acta.pauses where namespace like 'cli-pause%' order by 1, 2`)).rows;
  const why = 'nothing paused; check the name, or give --force to pause it anyway (e.g. before its worker is first deployed)';
  // Each printed "paused: ..." and exited 0 before.
  expect(await acta(['pause', '--definition', 'cli-pause-jbo', '--namespace', 'cli-pause'])).toEqual({
    code: 1,
    stdout: '',
    stderr: `acta: no worker has declared a job definition named "cli-pause-jbo" in namespace "cli-pause" (declared there: "cli-pause-job"): ${why}\n`,
  });
  expect(await acta(['pause', '--namespace', 'cli-pause-typo'])).toEqual({
    code: 1,
    stdout: '',
    stderr: `acta: no worker has declared any job definition in namespace "cli-pause-typo" (acta namespaces lists the namespaces): ${why}\n`,
  });
  // The definition's namespace forgotten: the message names it.
  const elsewhere = await acta(['pause', '--definition', 'cli-pause-job']);
  expect(elsewhere).toMatchObject({ code: 1, stdout: '' });
  expect(elsewhere.stderr).toContain('"cli-pause-job" is declared in namespace "cli-pause" (--namespace "cli-pause")');
  expect(await pauses()).toEqual([]);

  expect(await acta(['pause', '--definition', 'cli-pause-job', '--namespace', 'cli-pause'])).toMatchObject({ code: 0, stderr: '', stdout: expect.stringMatching(/^paused: definition "cli-pause-job" of "cli-pause" by /) });
  expect(await acta(['pause', '--namespace', 'cli-pause'])).toMatchObject({ code: 0, stderr: '', stdout: expect.stringMatching(/^paused: namespace "cli-pause" by /) });
  expect(await acta(['pause', '--definition', 'not-deployed-yet', '--namespace', 'cli-pause-typo', '--force'])).toMatchObject({ code: 0, stderr: '' });
  expect(await pauses()).toEqual([
    { namespace: 'cli-pause', definition: '' },
    { namespace: 'cli-pause', definition: 'cli-pause-job' },
    { namespace: 'cli-pause-typo', definition: 'not-deployed-yet' },
  ]);
  await db.query(`delete from acta.pauses where namespace like 'cli-pause%'`);
});
