// The embedded database shared by the process that holds its folder (src/db/embeddedShare.ts):
// an `acta worker` process on a PGlite data folder, and beside it this process, `acta enqueue` and
// `acta job` on the same folder, through the socket the worker serves. Runs the built bin.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { assertMigrated, ConfigError, connect, createClient, createPgliteDb, DataDirLockedError, type Db, DbUnansweredError, EmbeddedShareClosedError, migrate, type Queryable } from '../src';
import { connectShared } from '../src/db/connectShared';
import { shareDb, socketPathFor, tempSocketPath } from '../src/db/embeddedShare';
import { waitFor } from './helpers/wait';

const ROOT = path.resolve(__dirname, '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BIN = path.join(ROOT, 'bin', 'acta.js');
const FIXTURE = path.join('test', 'fixtures', 'cli-jobs.js');

let dir: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'ops', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
});
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-share-'));
});
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

const env = () => {
  const e: NodeJS.ProcessEnv = { ...process.env, ACTA_DATA_DIR: path.join(dir, 'data'), ACTA_LOG_LEVEL: 'warn' };
  delete e.DATABASE_URL;
  return e;
};

function acta(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: env(), timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

function startWorker(): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, 'worker', FIXTURE, '--heartbeat', '1000'], { cwd: ROOT, env: env(), stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  return { child, exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))) };
}

test('beside a running `acta worker` on the embedded folder, `acta enqueue`, `acta job` and a client in another process use its database', async () => {
  expect((await acta(['migrate'])).code).toBe(0);
  const worker = startWorker();
  await waitFor(() => fs.existsSync(socketPathFor(path.join(dir, 'data'))), 'the worker serving its folder', 120_000);

  const enqueued = await acta(['enqueue', 'cli-echo', '{"n":1}']);
  expect(enqueued).toMatchObject({ code: 0, stderr: '' });
  const id = String((JSON.parse(enqueued.stdout) as { id: string }).id);

  const db = await connect({ dataDir: path.join(dir, 'data') });
  try {
    const client = createClient({ db });
    const result = await client.result<{ payload: { n: number }; pid: number }>(id, { timeoutMs: 20_000 });
    expect(result.payload).toEqual({ n: 1 });
    expect(result.pid).toBe(worker.child.pid);
    const job = await client.getJob(id);
    expect(job?.status).toBe('succeeded');
    expect(job?.finishedAt).toBeInstanceOf(Date);
    const shown = await acta(['job', id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/succeeded/);
  } finally {
    await db.close();
  }
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toBe(0);
  // The worker let go of the folder and its socket: the next process opens the folder itself.
  expect(fs.existsSync(socketPathFor(path.join(dir, 'data')))).toBe(false);
  const after = await connect({ dataDir: path.join(dir, 'data') });
  await after.close();
}, 300_000);

test('when the process holding the folder is killed, a worker and a client that used its socket go on: their next calls open the folder again (one takes it and serves the other)', async () => {
  const data = path.join(dir, 'data');
  expect((await acta(['migrate'])).code).toBe(0);
  const holder = spawn(process.execPath, ['-e', `require('./dist/src').createPgliteDb({ dataDir: ${JSON.stringify(data)} }).then(() => { console.log('open'); setInterval(() => {}, 1000); })`], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(holder);
  await new Promise<void>((resolve) => holder.stdout!.once('data', () => resolve()));
  const worker = startWorker();
  const db = await connect({ dataDir: data });
  let firstId = '';
  try {
    const client = createClient({ db, force: true }); // the worker may not have declared its definitions yet
    const first = await client.enqueue('cli-echo', { n: 1 });
    firstId = first.id;
    expect((await client.result<{ pid: number }>(first.id, { timeoutMs: 60_000 })).pid).toBe(worker.child.pid);

    // Killed: no goodbye, its lock and socket files left behind.
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    const second = await waitFor(() => client.enqueue('cli-echo', { n: 2 }).catch(() => undefined), 'an enqueue after the holder died', 30_000);
    const result = await client.result<{ payload: { n: number }; pid: number }>(second.id, { timeoutMs: 60_000 });
    expect(result).toMatchObject({ payload: { n: 2 }, pid: worker.child.pid });
    expect(worker.child.exitCode).toBeNull();
  } finally {
    await db.close();
  }
  // Whichever of the two held the folder, the worker goes on after this process let go, and stops cleanly.
  const shown = await acta(['job', firstId]);
  expect(shown).toMatchObject({ code: 0, stdout: expect.stringMatching(/succeeded/), stderr: '' });
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toBe(0);
}, 300_000);

test('a migrate queued behind the holder when it exits migrates all the same: `acta migrate` is safe from many processes at once on the embedded folder too', async () => {
  // Three `acta migrate` at once on a new folder: the one that took it migrated and exited, and
  // the two others, waiting behind it on its socket, failed with EmbeddedShareClosedError (exit 1).
  const data = path.join(dir, 'data');
  const holder = spawn(
    process.execPath,
    ['-e', `require('./dist/src').createPgliteDb({ dataDir: ${JSON.stringify(data)} }).then((db) => { console.log('open'); process.stdin.once('data', () => db.transaction(async (tx) => { await tx.query('select 1'); console.log('busy'); await new Promise((r) => setTimeout(r, 1500)); process.exit(0); })); })`],
    { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  children.push(holder);
  const line = (text: string) => new Promise<void>((resolve) => holder.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes(text) && resolve()));
  const open = line('open');
  await open;
  const db = await connect({ dataDir: data });
  try {
    const busy = line('busy');
    holder.stdin!.write('go\n');
    await busy;
    // Queued behind the holder's transaction, which ends with the holder's exit.
    const applied = await migrate(db);
    expect(applied).toContain('migrations/0001_core.sql');
    expect(holder.exitCode).toBe(0);
    await assertMigrated(db);
  } finally {
    await db.close();
  }
}, 120_000);

describe('the share on its own (one process serving, another Db reading through it)', () => {
  let holder: Db;
  let socketPath: string;
  let closeShare: () => Promise<void>;
  beforeAll(async () => {
    holder = await createPgliteDb({ dataDir: 'memory://', share: false });
  });
  afterAll(() => holder.close());
  beforeEach(async () => {
    await holder.query('drop table if exists t; create table t (id int primary key, at timestamptz, doc jsonb)');
    socketPath = tempSocketPath();
    closeShare = (await shareDb(holder, socketPath)).close;
  });
  afterEach(() => closeShare());

  test('values, dates and errors come back as from the database itself (an error keeps its SQLSTATE)', async () => {
    const remote = await connectShared(socketPath);
    const at = new Date('2026-12-05T10:00:00.123Z');
    await remote.query('insert into t values ($1, $2, $3)', [1, at, { a: [1, 'x'] }]);
    const { rows } = await remote.query<{ id: number; at: Date; doc: unknown }>('select * from t');
    expect(rows).toEqual([{ id: 1, at, doc: { a: [1, 'x'] } }]);
    await expect(remote.query('insert into t values (1, null, null)')).rejects.toMatchObject({ code: '23505' });
    await remote.close();
  });

  test('a remote transaction is isolated: the holder does not see it before commit, nor after rollback; a failing body rolls back', async () => {
    const remote = await connectShared(socketPath);
    let seenInside: number | undefined;
    let outside: Promise<{ rows: { n: number }[] }> | undefined;
    await remote.transaction(async (tx) => {
      await tx.query('insert into t values (2, null, null)');
      // The holder's own query waits for the remote transaction (one session): it sees the commit.
      outside = holder.query<{ n: number }>('select count(*)::int as n from t');
      seenInside = (await tx.query<{ n: number }>('select count(*)::int as n from t')).rows[0].n;
    });
    expect(seenInside).toBe(1);
    expect((await outside!).rows[0].n).toBe(1);
    await expect(
      remote.transaction(async (tx) => {
        await tx.query('insert into t values (3, null, null)');
        throw new Error('body failed');
      }),
    ).rejects.toThrow('body failed');
    expect((await holder.query<{ n: number }>('select count(*)::int as n from t')).rows[0].n).toBe(1);
    await remote.close();
  });

  test('a remote tx used after its transaction ended is refused with ConfigError, as on a server (src/db/endedTx.ts), nothing sent', async () => {
    const remote = await connectShared(socketPath);
    let stale!: Queryable;
    await remote.transaction(async (tx) => {
      stale = tx;
      await tx.query('insert into t values (4, null, null)');
    });
    const err = await stale.query('insert into t values (5, null, null)').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^tx was used after its transaction ended/);
    expect((await holder.query<{ id: number }>('select id from t')).rows).toEqual([{ id: 4 }]);
    await remote.close();
  });

  test('LISTEN through the share: a NOTIFY on the holder reaches the remote listener', async () => {
    const remote = await connectShared(socketPath);
    const got: string[] = [];
    const unlisten = await remote.listen('acta_test', { onNotify: (p) => got.push(p) });
    await holder.query("select pg_notify('acta_test', 'hello')");
    await waitFor(() => got.length === 1, 'the notification', 5_000);
    expect(got).toEqual(['hello']);
    await unlisten();
    await remote.close();
  });

  test('a remote transaction not begun within its deadline (the holder busy) fails with DbUnansweredError naming the holder, and the holder never begins it', async () => {
    const remote = await connectShared(socketPath, { holderPid: 4242 });
    let release = () => undefined as void;
    const busy = holder.transaction(() => new Promise<void>((resolve) => (release = resolve)));
    let ran = false;
    const given = await remote
      .transaction(
        async (tx) => {
          ran = true;
          await tx.query('insert into t values (4, null, null)');
        },
        { deadlineMs: 200 },
      )
      .catch((err: unknown) => err);
    expect(given).toBeInstanceOf(DbUnansweredError);
    expect(given).toMatchObject({ deadlineMs: 200, holder: { socketPath, pid: 4242 }, message: expect.stringContaining('(pid 4242, socket') });
    release();
    await busy;
    // Its begin reached the holder, which took the session for it only past the deadline: rolled back unbegun.
    await waitFor(async () => (await remote.query<{ one: number }>('select 1 as one')).rows.length === 1, 'the remote to be answered again');
    expect(ran).toBe(false);
    expect((await holder.query<{ n: number }>('select count(*)::int as n from t')).rows[0].n).toBe(0);
    await remote.close();
  });

  test('a LISTEN not answered within its deadline (ListenOptions.probeTimeoutMs: the holder busy or stopped) fails with DbUnansweredError naming the holder; the holder keeps no listener for it, neither one it took late nor one it reads too late', async () => {
    // The holder's LISTEN waits (its session busy) until `open`; `active` counts the LISTENs it holds.
    let open = () => undefined as void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let active = 0;
    let taken = 0;
    const slow: Db = {
      ...holder,
      async listen(channel, handlers) {
        await gate;
        const unlisten = await holder.listen(channel, handlers);
        taken++;
        active++;
        return async () => {
          active--;
          await unlisten();
        };
      },
    };
    const slowPath = tempSocketPath();
    const share = await shareDb(slow, slowPath);
    const remote = await connectShared(slowPath, { holderPid: 4242 });
    try {
      const heard: string[] = [];
      const given = await Promise.race([remote.listen('acta_late', { onNotify: (p) => heard.push(p) }, { probeTimeoutMs: 200 }).catch((err: unknown) => err), sleep(5_000).then(() => 'no answer')]);
      // Was: no answer until the holder's session was free.
      expect(given).toBeInstanceOf(DbUnansweredError);
      expect(given).toMatchObject({ deadlineMs: 200, holder: { socketPath: slowPath, pid: 4242 } });
      // Taken by the holder past the deadline: the follower, told of it late, has it ended.
      open();
      await waitFor(() => taken === 1 && active === 0, 'the late LISTEN to be taken and ended', 5_000);
      await holder.query("select pg_notify('acta_late', 'lost')");
      await sleep(100);
      expect(heard).toEqual([]);
      // One read past its deadline (a holder that was stopped) is refused unstarted.
      const raw = net.createConnection(slowPath);
      let answer = '';
      raw.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
      raw.write(`${JSON.stringify({ id: 1, op: 'listen', channel: 'acta_late', deadlineAt: Date.now() - 1 })}\n`);
      await waitFor(() => answer.split('\n').length > 2, 'the answer', 5_000);
      raw.destroy();
      const [hello, refusal] = answer.split('\n').map((line) => (line ? JSON.parse(line) : line));
      expect(hello).toEqual({ hello: 1 }); // the holder's first frame on a connection it took
      expect(refusal).toMatchObject({ id: 1, error: { code: 'ACTA_DB_UNANSWERED' } });
      expect(taken).toBe(1);
    } finally {
      await remote.close();
      await share.close();
    }
  });

  test("a deadline past Node's longest timer (2^31 - 1 ms) is waited for, not taken for one already passed", async () => {
    const remote = await connectShared(socketPath);
    const long = { deadlineMs: 2 ** 31 + 60_000 };
    await expect(remote.query<{ one: number }>('select pg_sleep(0.05), 1 as one', [], long)).resolves.toMatchObject({ rows: [{ one: 1 }] });
    await expect(remote.transaction(async (tx) => (await tx.query<{ one: number }>('select pg_sleep(0.05), 1 as one')).rows[0].one, long)).resolves.toBe(1);
    await remote.close();
  });

  test('when the serving process lets go, pending and later calls reject with EmbeddedShareClosedError', async () => {
    const remote = await connectShared(socketPath);
    await closeShare();
    closeShare = async () => undefined;
    await expect(remote.query('select 1')).rejects.toBeInstanceOf(EmbeddedShareClosedError);
    await remote.close();
  });
});

test('a folder held by a process that does not serve it refuses with DataDirLockedError saying so, without waiting for a socket; once it is gone the folder opens', async () => {
  const data = path.join(dir, 'data');
  const child = spawn(process.execPath, ['-e', `require('./dist/src').createPgliteDb({ dataDir: ${JSON.stringify(data)}, share: false }).then(() => { console.log('open'); setInterval(() => {}, 1000); })`], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
  // unshared: read from the holder's acta.unshared, not concluded after the socket wait.
  const refused = await connect({ dataDir: data }).then(() => undefined, (err: unknown) => err);
  expect(refused).toBeInstanceOf(DataDirLockedError);
  expect(refused).toMatchObject({ pid: child.pid, unshared: true, message: expect.stringContaining('does not serve it') });
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const db = await connect({ dataDir: data });
  try {
    expect((await db.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
  } finally {
    await db.close();
  }
}, 120_000);

test('a holder that dies before it serves the folder (killed while PGlite started) leaves it to the process waiting for its socket', async () => {
  const data = path.join(dir, 'data');
  fs.mkdirSync(data, { recursive: true });
  // A live process in the lock, serving nothing: what a holder is while its PGlite starts.
  const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(holder);
  fs.writeFileSync(path.join(data, 'acta.lock'), String(holder.pid));
  const opening = connect({ dataDir: data });
  await new Promise((r) => setTimeout(r, 1_000));
  holder.kill('SIGKILL');
  const db = await opening;
  try {
    expect((await db.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    expect(fs.readFileSync(path.join(data, 'acta.lock'), 'utf8')).toBe(String(process.pid));
  } finally {
    await db.close();
  }
}, 120_000);

test("a data path too long for a socket beside it is served in this user's own temp folder (0700); one another user made, or others may enter, is not used", async () => {
  const longDir = path.join(dir, 'x'.repeat(120), 'data');
  expect(path.dirname(socketPathFor(longDir))).toBe(path.join(os.tmpdir(), `acta-${process.getuid?.() ?? 'user'}`));
  if (process.getuid?.() !== 0) {
    console.log('skipped: the rest makes a folder owned by another user, which needs root (chown)');
    return;
  }
  // The same checks on a folder of the same shape made here, not the machine's own.
  const sockets = path.join(dir, `acta-${process.getuid()}`);
  const socketPath = path.join(sockets, path.basename(socketPathFor(longDir)));
  const holder = await createPgliteDb({ dataDir: 'memory://', share: false });
  try {
    // Served: the folder is made 0700; another process of this user connects.
    const share = await shareDb(holder, socketPath);
    expect(fs.statSync(sockets).mode & 0o777).toBe(0o700);
    const remote = await connectShared(socketPath);
    expect((await remote.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await remote.close();
    // The folder opened to others: its socket is not used.
    fs.chmodSync(sockets, 0o777);
    await expect(connectShared(socketPath)).rejects.toThrow(/closed to others/);
    // Another user's folder, with a socket in it: not connected to, not served in.
    fs.chmodSync(sockets, 0o700);
    fs.chownSync(sockets, 65534, 65534);
    await expect(connectShared(socketPath)).rejects.toThrow(/is not a folder of this user/);
    await expect(shareDb(holder, path.join(sockets, 'other.sock'))).rejects.toThrow(/is not a folder of this user/);
    fs.chownSync(sockets, process.getuid(), process.getgid!());
    await share.close();
  } finally {
    await holder.close();
  }
});
