/**
 * The process holding an embedded (PGlite) folder stops answering or goes away while others use it
 * through its socket (src/db/embeddedShare.ts; docs/operating.md, "Which database"). Real processes:
 * a holder (test/fixtures/embedded-holder.js), `acta worker` and `acta sql` on its folder, and this
 * process's own connect().
 * - SIGSTOP of the holder (Ctrl-Z in its terminal, a debugger, a frozen container): a follower's
 *   call fails with DbUnansweredError at its deadline, and the holder, once it runs again, does not
 *   run what the follower gave up on (was: `acta sql --deadline 1` and a client's call with a
 *   deadline waited for ever); a worker rides out a stop shorter than its deadlines, and one longer
 *   than its lease exits 1 and its job is run again by the next worker, nothing lost.
 * - A clean exit of the holder while followers are mid-call: an answer means it ran (was: the
 *   statement ran and its follower got EmbeddedShareClosedError, which a retry ran twice).
 * - Several first runs (`acta migrate`, programs that migrate and start a worker) at once on a new
 *   folder: each ends 0, with one migrated schema.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { assertMigrated, connect, createClient, createWorker, type Db, DbUnansweredError, defineJob, withDeadline } from '../../src';
import { eventsFile, exitWithin, FIXTURE, killAll, readEvents, ROOT, sleep, spawnWorker } from './harness';
import { waitFor } from '../helpers/wait';

let dir: string;
let data: string;
const holders: ChildProcess[] = [];
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-holder-'));
  data = path.join(dir, 'data');
});
afterEach(async () => {
  for (const holder of holders.splice(0)) {
    holder.kill('SIGCONT');
    holder.kill('SIGKILL');
  }
  await killAll();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The holder of `data`, migrated and serving it once this resolves. */
async function startHolder(): Promise<ChildProcess & { said: (text: string) => Promise<void> }> {
  const child = spawn(process.execPath, ['test/fixtures/embedded-holder.js', data], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  holders.push(child);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const said = (text: string) => waitFor(() => out.includes(`${text}\n`) || child.exitCode !== null, `the holder to say ${text}`, 60_000).then(() => {
    if (!out.includes(`${text}\n`)) throw new Error(`the holder exited (${child.exitCode}) before saying ${text}`);
  });
  await said('open');
  return Object.assign(child, { said });
}

/** `acta <args>` on the folder: exit code (-1: the guard killed it, a hang), stdout, stderr. */
function acta(args: string[], guardMs = 20_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, ACTA_DATA_DIR: data, ACTA_LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/acta.js', ...args], { cwd: ROOT, env, timeout: guardMs }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** `promise`'s value or error, or 'no answer' when it has neither after `ms` (a hang). */
function settled<T>(promise: Promise<T>, ms: number): Promise<T | unknown> {
  return Promise.race([promise.catch((err: unknown) => err), sleep(ms).then(() => 'no answer')]);
}

const worker = (events: string, h: number) => spawnWorker({ dbUrl: '', events, env: { ACTA_DATA_DIR: data }, args: ['--heartbeat', String(h), '--shutdown-timeout', '1000'] });

test('SIGSTOP of the holder: a follower call fails at its deadline (DbUnansweredError) and is not run after SIGCONT; a worker rides out a short stop; all goes on after SIGCONT', async () => {
  const holder = await startHolder();
  const events = eventsFile();
  const w = worker(events, 2_000); // deadlines: attempt 5 s after the last renewal, each call 5 s
  await w.workerId();
  const db: Db = await connect({ dataDir: data });
  try {
    const client = createClient({ db });
    await db.query('create table probe (n int)');
    const first = await client.enqueue('work', { ms: 3_000 });
    await waitFor(() => readEvents(events).some((e) => e.jobId === first.id && e.event === 'start'), 'the job to start');

    holder.kill('SIGSTOP');
    const sql = acta(['sql', '--deadline', '1', 'select 1']);
    const given = await settled(withDeadline(db, 1_000).query('insert into probe values (1)'), 10_000);
    expect(given).toBeInstanceOf(DbUnansweredError);
    expect(await sql).toMatchObject({
      code: 1,
      stderr: `acta: the process holding the embedded database (pid ${holder.pid}, socket ${path.join(data, 'acta.sock')}) did not answer within 1000 ms: it is stopped (Ctrl-Z, SIGSTOP, a debugger: \`kill -CONT ${holder.pid}\` or \`fg\` in its terminal lets it go on) or busy (another process's long statement or transaction holds its one session); the statement ran only if that process had taken it before, and it will not start it now; a longer statement needs a larger --deadline <s> (now 1)\n`,
    });
    holder.kill('SIGCONT');

    await waitFor(() => readEvents(events).some((e) => e.jobId === first.id && e.event === 'done'), 'the job begun before the stop to end');
    expect((await client.result(first.id, { timeoutMs: 10_000 })) as unknown).toEqual({ pid: w.pid, execution: 1 });
    expect(readEvents(events).filter((e) => e.jobId === first.id).map((e) => e.event)).toEqual(['start', 'done']);
    // The insert given up on at its deadline was not run when the holder went on.
    expect((await db.query('select count(*)::int as n from probe')).rows).toEqual([{ n: 0 }]);
    const second = await client.enqueue('work', { ms: 10 });
    expect((await client.result(second.id, { timeoutMs: 10_000 })) as unknown).toEqual({ pid: w.pid, execution: 1 });
  } finally {
    await db.close();
  }
  expect(w.child.exitCode).toBeNull();
  w.kill('SIGTERM');
  expect(await exitWithin(w, 15_000)).toEqual({ code: 0, signal: null });
}, 60_000);

test('SIGSTOP of the holder for longer than a lease: the worker holding an attempt exits 1, and after SIGCONT the next worker runs the job again, nothing lost', async () => {
  const holder = await startHolder();
  const events = eventsFile();
  const H = 500;
  const a = worker(events, H);
  await a.workerId();
  const db = await connect({ dataDir: data });
  try {
    const client = createClient({ db });
    const job = await client.enqueue('work', { slowOnExecution: 1, slowMs: 60_000, ms: 10 });
    await waitFor(() => readEvents(events).some((e) => e.jobId === job.id && e.event === 'start'), 'the job to start');
    await sleep(2 * H); // a heartbeat reported the start

    holder.kill('SIGSTOP');
    expect(await exitWithin(a, 20_000)).toEqual({ code: 1, signal: null });
    expect(a.output()).toMatch(/no heartbeat succeeded for a whole lease/);
    holder.kill('SIGCONT');

    const b = worker(events, H);
    const done = (await client.result(job.id, { timeoutMs: 20_000 })) as { pid: number; execution: number };
    expect(done).toEqual({ pid: b.pid, execution: 2 });
    const ledger = await db.query<{ execution: number; outcome: string }>('select execution, outcome from acta.all_executions where job_id = $1 order by execution', [job.id]);
    expect(ledger.rows.map((r) => r.outcome)).toEqual([expect.stringMatching(/^(lost|released|failed)/), 'succeeded']);
    b.kill('SIGTERM');
    expect(await exitWithin(b, 15_000)).toEqual({ code: 0, signal: null });
  } finally {
    await db.close();
  }
}, 60_000);

test('a worker started while the holder is stopped: it exits 1 at its start timeout naming the holder (pid, socket) and `kill -CONT`, not DATABASE_URL', async () => {
  const holder = await startHolder();
  holder.kill('SIGSTOP');
  const sock = path.join(data, 'acta.sock');
  const stopped = `it is stopped (Ctrl-Z, SIGSTOP, a debugger: \`kill -CONT ${holder.pid}\` or \`fg\` in its terminal lets it go on) or busy`;
  // Below its calls' deadline (5 s): no error came yet. Was: "check the database address (DATABASE_URL)".
  const early = await acta(['worker', FIXTURE, '--heartbeat', '500', '--start-timeout', '1000']);
  expect(early.code).toBe(1);
  expect(early.stderr).toContain(`acta: the worker could not reach the database within 1000 ms of its start (no error yet: the process holding the embedded database (pid ${holder.pid}, socket ${sock}) has not answered: ${stopped}`);
  expect(early.stderr).toContain('start the worker again once that process answers, or raise startTimeoutMs\n');
  // Past it: the call's DbUnansweredError is the last error, and says the same.
  const late = await acta(['worker', FIXTURE, '--heartbeat', '500', '--start-timeout', '6000']);
  expect(late.code).toBe(1);
  expect(late.stderr).toContain(`(last error: the process holding the embedded database (pid ${holder.pid}, socket ${sock}) did not answer within 5000 ms: ${stopped}`);
  for (const { stderr } of [early, late]) expect(stderr).not.toContain('DATABASE_URL');
}, 60_000);

test("a follower worker's LISTEN sent while the holder is stopped: it is down at its deadline, naming the holder's pid and `kill -CONT`, the worker goes on; after SIGCONT it listens again, and stopped it leaves no listener on the holder", async () => {
  const holder = await startHolder();
  const db = await connect({ dataDir: data });
  const lines: { msg: string; err?: { message: string } }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
  // The worker's LISTEN goes out right after its registration: the holder is stopped at that instant.
  const stopping: Db = {
    ...db,
    listen: (channel, handlers, options) => {
      holder.kill('SIGSTOP');
      return db.listen(channel, handlers, options);
    },
  };
  const w = createWorker({ db: stopping, definitions: [defineJob({ name: 'echo', handler: async (n: number) => n })], logger, heartbeatIntervalMs: 2_000, safetyPollMs: 1_000 });
  const health: string[] = [];
  w.events$.subscribe((e) => {
    if (e.type === 'degraded' || e.type === 'recovered') health.push(`${e.cause} ${e.type}`);
  });
  try {
    await w.start();
    // Was: the LISTEN waited for the holder, unheard of, for as long as it was stopped.
    const down = await waitFor(() => lines.find((l) => l.msg.startsWith('LISTEN connection lost')), 'the LISTEN to be down', 10_000);
    expect(down.err?.message).toContain(`the process holding the embedded database (pid ${holder.pid}, socket ${path.join(data, 'acta.sock')}) did not answer within 5000 ms: it is stopped (Ctrl-Z, SIGSTOP, a debugger: \`kill -CONT ${holder.pid}\``);
    expect(health).toContain('listener degraded');
    holder.kill('SIGCONT'); // the attempt given up on is refused, the one under way taken
    await waitFor(() => health.includes('listener recovered'), 'the LISTEN to be in effect again', 10_000);
    const client = createClient({ db });
    const job = await client.enqueue('echo', 7);
    expect(await client.result(job.id, { timeoutMs: 10_000 })).toBe(7);
    await w.stop();
    // The holder keeps none of the worker's LISTENs: not the ones given up on, nor the one it stopped.
    await waitFor(async () => (await db.query<{ n: number }>("select count(*)::int as n from pg_listening_channels() c where c = 'acta_jobs'")).rows[0].n === 0, 'no LISTEN on the holder', 5_000);
  } finally {
    holder.kill('SIGCONT');
    await w.stop();
    await db.close();
  }
}, 90_000);

test("the folder's next holder stopped before it serves it (lock taken, no socket yet): a follower's call fails at its deadline naming that holder's pid and `kill -CONT`, as a call through a socket does", async () => {
  const first = await startHolder();
  const db = await connect({ dataDir: data });
  const next = spawn('sleep', ['60'], { stdio: 'ignore' });
  try {
    await db.query('select 1');
    first.kill('SIGTERM');
    await first.said('closed');
    // What a holder is from taking the lock until it serves (PGlite starting), stopped there: no socket comes.
    fs.writeFileSync(path.join(data, 'acta.lock'), String(next.pid));
    next.kill('SIGSTOP');
    const given = await settled(withDeadline(db, 1_000).query('select 1'), 10_000);
    expect(given).toBeInstanceOf(DbUnansweredError);
    // Was: "(socket …) did not answer …: `kill -CONT <its pid>`", though the lock names the pid.
    expect(given).toMatchObject({
      holder: { pid: next.pid },
      message: expect.stringContaining(`the process holding the embedded database (pid ${next.pid}, socket ${path.join(data, 'acta.sock')}) did not answer within 1000 ms: it is stopped (Ctrl-Z, SIGSTOP, a debugger: \`kill -CONT ${next.pid}\``),
    });
    // Gone without serving it: the follower takes the folder.
    next.kill('SIGKILL');
    expect((await db.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
  } finally {
    next.kill('SIGKILL');
    await db.close();
  }
}, 90_000);

test('the holder exiting cleanly while followers are mid-call: what it ran it answers before it lets go, an open remote transaction is rolled back, and the next holder has exactly what was answered; a LISTEN that finds the next holder listens once', async () => {
  const holder = await startHolder();
  const inTx = await connect({ dataDir: data });
  const queued = await connect({ dataDir: data });
  try {
    await inTx.query('create table probe (n int)');
    let release = () => undefined as void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let inserted = () => undefined as void;
    const begun = new Promise<void>((resolve) => (inserted = resolve));
    // A remote transaction holds the holder's one session; the other call waits behind it.
    const tx = inTx.transaction(async (t) => {
      await t.query('insert into probe values (1)');
      inserted();
      await held;
      await t.query('insert into probe values (2)');
    });
    await begun;
    const behind = queued.query('insert into probe values (3)');
    await sleep(300); // the insert has reached the holder
    holder.kill('SIGTERM');
    await holder.said('closed');
    release();
    const [txOutcome, behindOutcome] = await Promise.all([tx.then(() => 'committed', (err: unknown) => err), behind.then(() => 'answered', (err: unknown) => err)]);
    expect(txOutcome).toMatchObject({ code: 'ACTA_EMBEDDED_SHARE_CLOSED' });
    // The next call, here a LISTEN, opens the folder again: this process holds it now. It listens
    // once (was: by the reopen and again by itself, each NOTIFY heard twice).
    const heard: string[] = [];
    const unlisten = await queued.listen('acta_probe', { onNotify: (payload) => heard.push(payload) });
    await queued.query("select pg_notify('acta_probe', 'once')");
    await sleep(300);
    expect(heard).toEqual(['once']);
    await unlisten();
    const { rows } = await queued.query<{ n: number }>('select n from probe order by n');
    expect({ behind: behindOutcome, rows }).toEqual({ behind: 'answered', rows: [{ n: 3 }] });
  } finally {
    await inTx.close();
    await queued.close();
  }
}, 60_000);

test('a holder closing cleanly while a follower sends calls: each call it did not take goes to the next holder (here this process), every call succeeds and none runs twice', async () => {
  const holder = await startHolder();
  const db = await connect({ dataDir: data });
  const other = await connect({ dataDir: data });
  try {
    await db.query('create table probe (stream int, n int)');
    // A statement the holder took holds its session as it closes: the calls read meanwhile it refuses (not taken).
    const slow = other.query('select pg_sleep(1)');
    await sleep(100);
    let stop = false;
    const streams = [0, 1, 2, 3].map(async (stream) => {
      let n = 0;
      while (!stop) {
        await db.query('insert into probe values ($1, $2)', [stream, ++n]);
        // Once this process holds the folder its PGlite answers without I/O: the timers must get their turn.
        await new Promise((resolve) => setImmediate(resolve));
      }
      return n;
    });
    holder.kill('SIGTERM');
    await holder.said('closed');
    await sleep(500); // the calls go on through the next holder
    stop = true;
    const sent = await Promise.all(streams); // rejects if any call failed
    await slow;
    await waitFor(() => holder.exitCode !== null, 'the holder to exit', 10_000);
    expect(holder.exitCode).toBe(0);
    const { rows } = await db.query<{ stream: number; rows: string; distinct_n: string; top: number }>(
      'select stream, count(*)::text as rows, count(distinct n)::text as distinct_n, max(n) as top from probe group by stream order by stream',
    );
    expect(rows).toEqual(sent.map((n, stream) => ({ stream, rows: String(n), distinct_n: String(n), top: n })));
  } finally {
    await db.close();
    await other.close();
  }
}, 60_000);

test('a short-lived holder closing with connections it never took (queued while its event loop was held, as by a migration): the follower connects to the next holder and its call succeeds', async () => {
  const holder = await startHolder();
  holder.kill('SIGUSR2'); // holds its event loop 1.5 s, then closes and exits
  await sleep(300);
  const db = await connect({ dataDir: data });
  try {
    const { rows } = await db.query<{ one: number }>('select 1 as one');
    expect(rows).toEqual([{ one: 1 }]);
    await waitFor(() => holder.exitCode !== null, 'the holder to exit', 10_000);
    expect(holder.exitCode).toBe(0);
  } finally {
    await db.close();
  }
}, 60_000);

test('two `acta migrate` and two first runs of a program (connect, migrate, a worker, a job) at once on a new folder: each ends 0, with one migrated schema', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, ACTA_DATA_DIR: data, ACTA_LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  const run = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, args, { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });
  const [m1, m2, p1, p2] = await Promise.all([
    run(['bin/acta.js', 'migrate']),
    run(['bin/acta.js', 'migrate']),
    run(['test/fixtures/first-run.js', 'Ada']),
    run(['test/fixtures/first-run.js', 'Grace']),
  ]);
  for (const m of [m1, m2]) expect(m).toMatchObject({ code: 0, stderr: '' });
  expect(p1).toMatchObject({ code: 0, stderr: '', stdout: expect.stringContaining('"greeting":"hello, Ada"') });
  expect(p2).toMatchObject({ code: 0, stderr: '', stdout: expect.stringContaining('"greeting":"hello, Grace"') });
  const db = await connect({ dataDir: data });
  try {
    await assertMigrated(db);
    const { rows } = await db.query<{ name: string; n: number }>('select name, count(*)::int as n from acta.migrations group by name having count(*) > 1');
    expect(rows).toEqual([]);
  } finally {
    await db.close();
  }
}, 90_000);

test('a holder in another pid namespace (another container with the folder mounted): connect() here uses it through its socket, and never opens the folder beside it', async () => {
  if (process.getuid?.() !== 0 || spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status !== 0) {
    console.log('skipped: needs root and unshare(1) to start a process in a pid namespace of its own');
    return;
  }
  // PID 1 of its own namespace, as in a container; here pid 1 is init, started at another time.
  const holder = spawn('unshare', ['--pid', '--kill-child', '--mount-proc', process.execPath, 'test/fixtures/embedded-holder.js', data], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  holders.push(holder);
  await new Promise<void>((resolve) => holder.stdout!.on('data', (chunk: Buffer) => String(chunk).includes('open') && resolve()));
  const db = await connect({ dataDir: data });
  try {
    await db.query('create table probe (n int)');
    await db.query('insert into probe values (1)');
    expect((await db.query('select count(*)::int as n from probe')).rows).toEqual([{ n: 1 }]);
    // Was: the lock taken over (its pid judged reused) and the folder opened by two processes at once.
    expect(fs.readFileSync(path.join(data, 'acta.lock'), 'utf8')).toBe('1');
  } finally {
    await db.close();
  }
}, 60_000);
