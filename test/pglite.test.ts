// The same core flow on the embedded default, PGlite (PostgreSQL in WASM, in-process), and the
// lock file that keeps two processes off one data folder. Needs --experimental-vm-modules
// (`npm test` passes it): PGlite's CommonJS build loads itself with a dynamic import.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type Client, ConfigError, connect, createClient, createPgliteDb, createWorker, DataDirLockedError, DataDirUnusableError, DataDirVersionError, defineJob, migrate, type Db, type Queryable } from '../src';
import { lockDataDir, readHolder, removeStaleLock, takeoverPath } from '../src/db/dataDirLock';
import { livenessPath } from '../src/db/holderLiveness';
import { EMBEDDED_PG_MAJOR, unusable } from '../src/db/pgliteDb';
import { silentLogger } from './helpers/silentLogger';
import { waitFor } from './helpers/wait';

describe('the core flow on PGlite (memory://)', () => {
  let db: Db;
  beforeAll(async () => {
    db = await createPgliteDb({ dataDir: 'memory://' });
    await migrate(db);
  }, 60_000);
  afterAll(() => db?.close());

  // acta.all_jobs: a succeeded job without parent, watch, schedule or idempotency key leaves
  // acta.jobs for acta.succeeded_jobs at its completion.
  const job = async (id: string) =>
    (await db.query<{ status: string; attempts: number; execution: number; result: unknown; error: { message?: string } | null }>(
      'select status, attempts, execution, result, error from acta.all_jobs where id = $1',
      [id],
    )).rows[0];

  test('EMBEDDED_PG_MAJOR is the major version PGlite runs (the data folder check compares with it)', async () => {
    const { rows } = await db.query<{ v: string }>(`select current_setting('server_version_num') as v`);
    expect(Math.floor(Number(rows[0].v) / 10000)).toBe(EMBEDDED_PG_MAJOR);
  });

  test('migrate is idempotent on PGlite too', async () => {
    expect(db.kind).toBe('pglite');
    expect(await migrate(db)).toEqual([]);
  });

  test("the claim's resumed scan is off on PGlite: one session, so a slow pick is never a held snapshot's (claim_jobs.sql)", async () => {
    const { rows } = await db.query<{ v: string }>(`select current_setting('acta.claim_resume_after_ms') as v`);
    expect(Number(rows[0].v)).toBe(Infinity);
  });

  test('enqueue → worker → succeeded; a handler that always throws is retried with back-off, then Failed', async () => {
    const backoff = { delayMs: 30 };
    let failures = 0;
    const add = defineJob<{ a: number; b: number }>({ name: 'add', handler: async (p) => ({ sum: p.a + p.b }) });
    const boom = defineJob({
      name: 'boom',
      backoff,
      handler: async () => {
        failures++;
        throw new Error(`boom ${failures}`);
      },
    });
    const worker = createWorker({ db, definitions: [add, boom], logger: silentLogger, executors: 4 });
    await worker.start();
    const client = createClient({ force: true, db });
    const ok = await client.enqueue('add', { a: 20, b: 22 });
    const bad = await client.enqueue('boom', {}, { maxAttempts: 3 });
    const dup = await client.enqueue('add', { a: 0, b: 0 }, { idempotencyKey: 'once' });
    expect(await client.enqueue('add', { a: 1, b: 1 }, { idempotencyKey: 'once' })).toEqual({ id: dup.id, created: false });
    await waitFor(async () => (await job(ok.id)).status === 'succeeded' && (await job(bad.id)).status === 'failed', 'both jobs to finish', 30_000);
    await worker.stop();

    expect(await job(ok.id)).toMatchObject({ status: 'succeeded', attempts: 1, execution: 1, result: { sum: 42 } });
    expect(await job(bad.id)).toMatchObject({ status: 'failed', attempts: 3, execution: 3, error: { message: 'boom 3' } });
    expect(failures).toBe(3);
    // client.getJob on PGlite: the same record as on a server (its json and timestamptz decoded alike).
    expect(await client.getJob(ok.id)).toMatchObject({ status: 'succeeded', result: { sum: 42 }, error: null, runAt: expect.any(Date), finishedAt: expect.any(Date) });
    const read = await client.getJob(bad.id);
    expect(read).toMatchObject({ status: 'failed', attempts: 3, maxAttempts: 3, error: { name: 'Error', message: 'boom 3' } });
    expect(read!.executions.map((e) => [e.execution, e.outcome, e.error?.message])).toEqual([[1, 'failed', 'boom 1'], [2, 'failed', 'boom 2'], [3, 'failed_final', 'boom 3']]);
    expect(read!.executions[0].finishedAt.getTime()).toBeGreaterThanOrEqual(read!.executions[0].claimedAt.getTime());
    const { rows } = await db.query<{ outcome: string; gap_ms: number | null }>(
      // A retry is due its back-off after its completion's start (run_at = now() + delay): measured
      // from the attempt's claim, which precedes it. Its finished_at is read later in that call,
      // once the row locks are held (docs/decisions/2026-12-05-ledger-times.md), and a gap measured
      // from it fell short once (29 ms for 30, on Node 24 in CI); as test/db/core.test.ts measures.
      `select outcome, (extract(epoch from (lead(claimed_at) over (order by execution) - claimed_at)) * 1000)::float8 as gap_ms
         from acta.executions where job_id = $1 order by execution`,
      [bad.id],
    );
    expect(rows.map((r) => r.outcome)).toEqual(['failed', 'failed', 'failed_final']);
    expect(rows[0].gap_ms).toBeGreaterThanOrEqual(30);
    expect(rows[1].gap_ms).toBeGreaterThanOrEqual(60);
    const { rows: workers } = await db.query<{ status: string }>('select status from acta.workers');
    expect(workers).toEqual([{ status: 'stopped' }]);
  });
});

describe('errors on PGlite', () => {
  test('a failed query leaves the one session usable: later queries get their own answers, and a refused enqueue writes nothing', async () => {
    const db = await createPgliteDb({ dataDir: 'memory://' });
    try {
      // Before migrating: the enqueue fails inside the database, and the client says to migrate.
      await expect(createClient({ force: true, db }).enqueue('x', {})).rejects.toMatchObject({
        code: 'ACTA_SCHEMA_NOT_MIGRATED',
        cause: expect.objectContaining({ message: expect.stringMatching(/schema "acta" does not exist|acta\.enqueue_jobs/) }),
      });
      // Also inside a transaction, which holds PGlite's one session: asking the migrator on the
      // Db's own session waited for it forever, and every later query with it.
      const calls: ((c: Client, tx: Queryable) => Promise<unknown>)[] = [(c, tx) => c.getJob('1', { tx }), (c, tx) => c.cancel('1', { tx }), (c, tx) => c.enqueue('x', {}, { tx })];
      for (const call of calls) {
        await expect(db.transaction((tx) => call(createClient({ force: true, db }), tx))).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NOT_MIGRATED' });
      }
      await migrate(db);
      await expect(db.query('select * from acta.jobz')).rejects.toThrow(/does not exist/);
      await expect(db.query('select 1 / $1::int as x', [0])).rejects.toThrow(/division by zero/);
      expect((await db.query<{ x: number }>('select $1::int + 1 as x', [41])).rows).toEqual([{ x: 42 }]);
      const worker = createWorker({ db, definitions: [defineJob({ name: 'ok', handler: async (p: { n: number }) => p.n * 2 })], logger: silentLogger, executors: 2 });
      await worker.start();
      const client = createClient({ force: true, db });
      const ids = [];
      for (let n = 1; n <= 3; n++) {
        await expect(db.query('select * from acta.nope')).rejects.toThrow(/does not exist/);
        ids.push((await client.enqueue('ok', { n })).id);
      }
      await waitFor(async () => (await db.query(`select 1 from acta.all_jobs where status = 'succeeded'`)).rows.length === 3, 'three jobs to succeed');
      await worker.stop();
      const { rows } = await db.query<{ id: string; result: number }>('select id, result from acta.all_jobs order by id');
      expect(rows).toEqual(ids.map((id, i) => ({ id, result: (i + 1) * 2 })));
    } finally {
      await db.close();
    }
  });
});

test('a tx used after its db.transaction ended is refused with ConfigError, as on a server (src/db/endedTx.ts), nothing written; inside its transaction it works', async () => {
  const db = await createPgliteDb({ dataDir: 'memory://' });
  try {
    await db.query('create table t (n int)');
    let stale!: Queryable;
    await db.transaction(async (tx) => {
      stale = tx;
      await tx.query('insert into t values (1)');
    });
    const err = await stale.query('insert into t values (2)').then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^tx was used after its transaction ended/);
    expect((await db.query<{ n: number }>('select n from t')).rows).toEqual([{ n: 1 }]);
  } finally {
    await db.close();
  }
});

describe('the data folder lock', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-pglite-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  // Linux: the lock tells a pid's incarnations apart by /proc (src/db/dataDirLock.ts, lockDataDir).
  const bootId = () => fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  /** Process `pid`'s incarnation as its lock records it: its start time in clock ticks since boot (/proc/<pid>/stat, field 22) and the boot's id. */
  const incarnationOf = (pid: number) => {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return `${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}-${bootId()}`;
  };
  /** The lock a holder of `pid` left (killed: no release): its pid in acta.lock and, when it recorded one, its own file named after its incarnation, a hard link of the lock. */
  const leaveLock = (dir: string, pid: number, incarnation?: string) => {
    fs.writeFileSync(path.join(dir, 'acta.lock'), String(pid));
    if (incarnation) fs.linkSync(path.join(dir, 'acta.lock'), path.join(dir, `acta.lock.${pid}.${incarnation}`));
  };
  const ownFile = (pid: number) => `acta.lock.${pid}.${incarnationOf(pid)}`;
  /** What a live holder of `pid` keeps in the folder: its lock, its own file and its liveness socket (src/db/holderLiveness.ts). */
  const heldBy = (dir: string, pid: number) => [path.basename(livenessPath(dir, pid, incarnationOf(pid))!), 'acta.lock', ownFile(pid)];
  const sleeper = () => {
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    return { pid: child.pid!, gone: () => (child.kill('SIGKILL'), new Promise((r) => child.once('exit', r))) };
  };

  test('a data folder open in this process refuses a second open with DataDirLockedError; after close it opens again', async () => {
    const dir = tempDir();
    const exitListeners = process.listenerCount('exit');
    const db = await createPgliteDb({ dataDir: dir });
    try {
      expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe(String(process.pid));
      const second = createPgliteDb({ dataDir: dir });
      await expect(second).rejects.toThrow(DataDirLockedError);
      await expect(second).rejects.toMatchObject({ code: 'ACTA_DATA_DIR_LOCKED', pid: process.pid, dataDir: dir });
      // Before, it said "in use by process <this one>; one process per data directory".
      await expect(second).rejects.toThrow(`the data directory ${dir} is locked with this process's pid (${process.pid}): it is open in this process already (open it once per process and share that Db), or the lock was left by an earlier process with the same pid that recorded no start time to tell it apart (no /proc here: then remove ${dir}/acta.lock)`);
      // The refused open did not take the lock away from its holder, nor the holder's own file beside it.
      expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe(String(process.pid));
      expect(fs.readdirSync(dir).filter((name) => name.startsWith('acta.lock')).sort()).toEqual(['acta.lock', ownFile(process.pid)]);
      await migrate(db);
      await createClient({ force: true, db }).enqueue('kept', { n: 1 });
    } finally {
      await db.close();
    }
    expect(fs.readdirSync(dir).filter((name) => name.startsWith('acta.lock'))).toEqual([]);
    expect(process.listenerCount('exit')).toBe(exitListeners); // close() leaves no exit hook behind
    // Reopened: the data survived the close.
    const again = await createPgliteDb({ dataDir: dir });
    try {
      const { rows } = await again.query<{ definition: string }>('select definition from acta.jobs');
      expect(rows).toEqual([{ definition: 'kept' }]);
    } finally {
      await again.close();
    }
  }, 60_000);

  test('a relative data folder is the one it named at the open: a chdir after it does not leave the lock behind at close', async () => {
    const parent = tempDir();
    const cwd = process.cwd();
    process.chdir(parent);
    let db: Db | undefined;
    try {
      db = await createPgliteDb({ dataDir: 'rel' });
      process.chdir(os.tmpdir());
      await db.close();
      db = undefined;
      expect(fs.existsSync(path.join(parent, 'rel', 'acta.lock'))).toBe(false);
    } finally {
      process.chdir(cwd);
      await db?.close();
    }
  }, 60_000);

  test('a stale lock file left by a dead process is taken over', async () => {
    const dir = tempDir();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const deadPid = Number(dead.stdout);
    expect(deadPid).toBeGreaterThan(0);
    fs.writeFileSync(path.join(dir, 'acta.lock'), String(deadPid));
    const db = await createPgliteDb({ dataDir: dir });
    try {
      expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe(String(process.pid));
      const { rows } = await db.query<{ one: number }>('select 1 as one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  }, 60_000);

  test('a lock file that is not a bare pid (garbage bytes, empty, a number written otherwise that names a live process) is stale: taken over, never a hang', () => {
    // acta writes the pid as decimal digits alone; `0x1` and ` 1` were read as PID 1, alive, and refused.
    for (const content of [Buffer.from([0, 0xff, 0x1b, 0x0a]), '', '0x1', ' 1\n', '1e0', '-1', '0']) {
      const dir = tempDir();
      fs.writeFileSync(path.join(dir, 'acta.lock'), content);
      const release = lockDataDir(dir);
      try {
        expect({ content, lock: fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8') }).toEqual({ content, lock: String(process.pid) });
      } finally {
        release();
      }
      expect(fs.readdirSync(dir)).toEqual([]);
    }
  });

  test('a folder named acta.lock in the data folder (a bind mount of a missing file makes one) is DataDirUnusableError naming it and the fix, not a raw EISDIR; connect() says the same', async () => {
    const dir = tempDir();
    const lock = path.join(dir, 'acta.lock');
    fs.mkdirSync(lock);
    const message = `the data directory ${dir} cannot be used for the embedded database: ${lock} is a folder, where acta keeps the lock file of the process holding the data folder. Remove that folder (rmdir ${lock}; a container's bind mount of a file missing on the host makes one: mount nothing there), then start again`;
    let thrown: unknown;
    try {
      lockDataDir(dir);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(DataDirUnusableError);
    expect(thrown).toMatchObject({ code: 'ACTA_DATA_DIR_UNUSABLE', reason: 'EISDIR', dataDir: dir, message });
    await expect(connect({ dataDir: dir })).rejects.toMatchObject({ code: 'ACTA_DATA_DIR_UNUSABLE', message });
    // Nothing of this process's is left beside it.
    expect(fs.readdirSync(dir)).toEqual(['acta.lock']);
  });

  test('a FIFO named acta.lock is DataDirUnusableError (reason EFTYPE) naming it and the fix, not a hang', () => {
    const dir = tempDir();
    const lock = path.join(dir, 'acta.lock');
    expect(spawnSync('mkfifo', [lock]).status).toBe(0);
    // In a process of its own: the hang this was (the lock read as a file waits for a writer for ever) would block this one.
    const child = spawnSync(
      process.execPath,
      ['-e', `require('./dist/src').connect({ dataDir: ${JSON.stringify(dir)} }).then(() => console.log('opened'), (e) => console.log(JSON.stringify({ code: e.code, reason: e.reason, message: e.message })))`],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect({ signal: child.signal, stderr: child.stderr }).toEqual({ signal: null, stderr: '' });
    expect(JSON.parse(child.stdout)).toEqual({
      code: 'ACTA_DATA_DIR_UNUSABLE',
      reason: 'EFTYPE',
      message: `the data directory ${dir} cannot be used for the embedded database: ${lock} is a FIFO (named pipe), not a file, where acta keeps the lock file of the process holding the data folder. Remove it (rm ${lock}), then start again`,
    });
    expect(fs.readdirSync(dir)).toEqual(['acta.lock']);
  });

  test("a folder where the holder's other side files go (its liveness socket, acta.sock, acta.unshared) is DataDirUnusableError (reason EISDIR) naming it and the fix, not a raw EISDIR nor a folder silently unserved", async () => {
    const cases: [string, string][] = [
      ['acta.sock', 'the socket the process holding the data folder serves it on to other processes'],
      ['acta.unshared', 'the mark of a holder that does not serve the data folder to other processes'],
    ];
    if (fs.existsSync('/proc/self/stat')) cases.push([path.basename(livenessPath('/', process.pid, incarnationOf(process.pid))!), 'the socket the process holding the data folder listens on while it runs (its liveness)']);
    for (const [name, role] of cases) {
      const dir = tempDir();
      const file = path.join(dir, name);
      fs.mkdirSync(file);
      // Was: acta.sock, opened unserved (others refused "does not serve it"); the others, a raw EISDIR.
      await expect(createPgliteDb({ dataDir: dir })).rejects.toMatchObject({
        code: 'ACTA_DATA_DIR_UNUSABLE',
        reason: 'EISDIR',
        dataDir: dir,
        message: `the data directory ${dir} cannot be used for the embedded database: ${file} is a folder, where acta keeps ${role}. Remove that folder (rmdir ${file}; a container's bind mount of a file missing on the host makes one: mount nothing there), then start again`,
      });
      // Nothing of this process's is left beside it: the lock was let go.
      expect(fs.readdirSync(dir)).toEqual([name]);
    }
  });

  test('a lock of a live process is refused naming the lock file, and what to do if that process is not acta (its pid reused)', async () => {
    const dir = tempDir();
    const other = sleeper();
    try {
      leaveLock(dir, other.pid); // as an acta that recorded no start time left it: the pid alone says
      expect(() => lockDataDir(dir)).toThrow(
        `the data directory ${dir} is in use by process ${other.pid}, named in its lock file ${dir}/acta.lock; one process per data directory: stop that process first (connect() uses the folder through it while it serves it). If process ${other.pid} is not acta (a pid reused since an acta left the lock), remove ${dir}/acta.lock`,
      );
    } finally {
      await other.gone();
    }
  });

  test('processes starting on one folder at the same instant: exactly one holds it, with or without a stale lock', async () => {
    const dead = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
    const race = async (dir: string) => {
      const startAt = Date.now() + 400; // every child spins until then, so they try together
      const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['test/fixtures/lock-child.js', dir, String(startAt)], { stdio: ['pipe', 'pipe', 'inherit'] }));
      // Each child's answer; the holder keeps the lock until every child has answered (its stdin
      // ends then), so a child that started late on a loaded machine still meets it.
      const answers = await Promise.all(
        children.map(
          (child) =>
            new Promise<string>((resolve, reject) => {
              let out = '';
              child.stdout!.on('data', (d) => {
                out += d;
                if (out.includes('\n')) resolve(out.trim());
              });
              child.on('error', reject);
              child.on('exit', () => resolve(out.trim()));
            }),
        ),
      );
      await Promise.all(children.map((child) => new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', () => resolve()), child.stdin!.end())))));
      return answers;
    };
    for (const stale of [false, true]) {
      for (let round = 0; round < 3; round++) {
        const dir = tempDir();
        if (stale) fs.writeFileSync(path.join(dir, 'acta.lock'), String(dead));
        const outcomes = (await race(dir)).sort();
        // The old lock, created empty and filled afterwards, was read empty in between and removed
        // under its holder: two of three starters held it in 20 of 30 rounds.
        expect({ stale, round, outcomes }).toEqual({ stale, round, outcomes: ['HOLDS', 'LOCKED', 'LOCKED', 'LOCKED'] });
      }
    }
  }, 60_000);

  test.each([
    ['another live process', () => process.ppid],
    ["a process with the stale holder's pid (a restarted container's PID 1)", (dead: number) => dead],
  ])('a starter that judged the lock stale late never moves the live lock that replaced it, not even for a moment: one of %s', async (_, replacer) => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'acta.lock');
    const dead = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
    fs.writeFileSync(lockPath, String(dead));
    const stale = readHolder(lockPath)!; // this starter read `dead` there...
    fs.unlinkSync(lockPath); // ...then another removed it, and a live holder took the folder
    fs.writeFileSync(lockPath, String(replacer(dead)));
    const mine = `${lockPath}.${process.pid}`;
    fs.writeFileSync(mine, String(process.pid));
    const touched: string[] = [];
    const watcher = fs.watch(dir, (_event, name) => touched.push(String(name)));
    try {
      await new Promise((r) => setTimeout(r, 50)); // the watch is in place
      removeStaleLock(lockPath, stale, mine);
      await new Promise((r) => setTimeout(r, 200)); // its events have arrived
    } finally {
      watcher.close();
      stale.close();
      fs.rmSync(mine);
    }
    // The rename-aside takeover moved it away and back: in between, a third starter took the name
    // and two processes held the folder (CI, Node 24). A lock of the same content is another
    // holder's when it is another file.
    expect(touched.filter((name) => name === 'acta.lock')).toEqual([]);
    expect(fs.readFileSync(lockPath, 'utf8')).toBe(String(replacer(dead)));
    expect(fs.readdirSync(dir)).toEqual(['acta.lock']); // no takeover file left behind
  });

  test('a data folder this process cannot use because a file is in the way is DataDirUnusableError naming it, the file and the fix; nothing is written', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'not-a-folder');
    fs.writeFileSync(file, 'mine');
    for (const [dataDir, problem] of [
      [file, 'it is a file, not a folder'],
      [path.join(file, 'data'), `${file} is a file, not a folder`],
    ]) {
      const opened = connect({ dataDir }); // the embedded default connect() opens, as the CLI does
      await expect(opened).rejects.toThrow(DataDirUnusableError);
      await expect(opened).rejects.toMatchObject({ code: 'ACTA_DATA_DIR_UNUSABLE', dataDir, reason: expect.stringMatching(/^(EEXIST|ENOTDIR)$/) });
      await expect(opened).rejects.toThrow(
        `the data directory ${dataDir} cannot be used for the embedded database: ${problem}. Give it a folder this user can write (the dataDir option of connect() or createPgliteDb, or ACTA_DATA_DIR), or use PostgreSQL (DATABASE_URL)`,
      );
    }
    expect(fs.readdirSync(dir)).toEqual(['not-a-folder']);
    expect(fs.readFileSync(file, 'utf8')).toBe('mine');
  });

  test.each([
    ['an older', -1],
    ['a newer', 1],
  ])('a data folder of %s PostgreSQL major version (made by another acta) is DataDirVersionError naming it, both versions and the fix; nothing is changed', async (_, step) => {
    // PGlite 0.6.1 (PostgreSQL 19) on a folder of 0.5.17 (PostgreSQL 18), and 0.5.17 on one of
    // 0.6.1, failed with only "PGlite failed to initialize properly". Which major made the folder
    // is its PG_VERSION file's.
    const dataDir = path.join(tempDir(), 'data');
    fs.mkdirSync(path.join(dataDir, 'base'), { recursive: true });
    const older = String(EMBEDDED_PG_MAJOR + step);
    fs.writeFileSync(path.join(dataDir, 'PG_VERSION'), `${older}\n`);
    fs.writeFileSync(path.join(dataDir, 'base', 'kept'), 'rows');
    for (const open of [() => connect({ dataDir }), () => createPgliteDb({ dataDir })]) {
      const opened = open();
      await expect(opened).rejects.toThrow(DataDirVersionError);
      await expect(opened).rejects.toMatchObject({ code: 'ACTA_DATA_DIR_VERSION', dataDir, found: older, expected: EMBEDDED_PG_MAJOR });
      await expect(opened).rejects.toThrow(
        `the data directory ${dataDir} holds a PostgreSQL ${older} database, made by another acta version's embedded PGlite; this acta's PGlite runs PostgreSQL ${EMBEDDED_PG_MAJOR}, which cannot open it`,
      );
      await expect(opened).rejects.toThrow(`docs/upgrading.md, "The embedded database"`);
      // The folder as it was: no lock left, nothing of PGlite's written.
      expect(fs.readdirSync(dataDir).sort()).toEqual(['PG_VERSION', 'base']);
      expect(fs.readdirSync(path.join(dataDir, 'base'))).toEqual(['kept']);
      expect(fs.readFileSync(path.join(dataDir, 'PG_VERSION'), 'utf8')).toBe(`${older}\n`);
    }
  });

  test("a data folder this process cannot use because another user owns it is DataDirUnusableError naming it, the permission problem and the fix", () => {
    // As root, chmod does not stop access: the folder is root's and the opener runs as nobody
    // (uid 65534); as any other user, the folder is its own with no write permission.
    const root = process.getuid?.() === 0;
    const parent = tempDir();
    fs.chmodSync(parent, 0o755); // nobody may pass through it
    const dataDir = path.join(parent, 'theirs');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    if (!root) fs.chmodSync(dataDir, 0o555);
    const repo = path.resolve(__dirname, '..');
    const asOpener = root ? { uid: 65534, gid: 65534 } : {};
    try {
      let err: { name: string; code: string; reason: string; dataDir: string; message: string };
      if (spawnSync(process.execPath, ['-e', `require('fs').accessSync(${JSON.stringify(path.join(repo, 'dist/src/index.js'))})`], asOpener).status === 0) {
        const child = spawnSync(process.execPath, ['test/fixtures/open-data-dir.js', dataDir], { cwd: repo, encoding: 'utf8', ...asOpener });
        expect(child.stderr).toBe('');
        err = JSON.parse(child.stdout);
      } else {
        // A clone only root can enter (CI's): nobody cannot load acta, so the error nobody's open
        // meets is given to the same mapping here.
        console.log(`${repo} is closed to uid 65534: the EACCES of its open is mapped in this process`);
        const cause = Object.assign(new Error(`EACCES: permission denied, open '${dataDir}/acta.lock.1'`), { code: 'EACCES', syscall: 'open', path: `${dataDir}/acta.lock.1` });
        const mapped = unusable(dataDir, cause) as DataDirUnusableError;
        expect(mapped).toBeInstanceOf(DataDirUnusableError);
        expect(mapped.cause).toBe(cause);
        err = { name: mapped.name, code: mapped.code, reason: mapped.reason, dataDir: mapped.dataDir, message: mapped.message };
      }
      expect(err).toMatchObject({ name: 'DataDirUnusableError', code: 'ACTA_DATA_DIR_UNUSABLE', reason: 'EACCES', dataDir });
      expect(err.message).toMatch(new RegExp(`^the data directory ${dataDir} cannot be used for the embedded database: permission denied \\(EACCES, open ${dataDir}/acta\\.lock\\.\\d+(\\.\\d+-[0-9a-f-]+)?\\): .* cannot create files in ${dataDir}, which is owned by uid ${root ? 0 : process.getuid?.()} with mode ${root ? '755' : '555'}\\. Give it a folder this user can write \\(the dataDir option of connect\\(\\) or createPgliteDb, or ACTA_DATA_DIR\\), or use PostgreSQL \\(DATABASE_URL\\)$`));
      expect(fs.readdirSync(dataDir)).toEqual([]);
    } finally {
      fs.chmodSync(dataDir, 0o755);
    }
  });

  test('a takeover file left by a process that died while taking over is removed, and the folder opens', async () => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'acta.lock');
    const [dead, deadTaker] = [0, 1].map(() => Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout));
    fs.writeFileSync(lockPath, String(dead));
    fs.writeFileSync(takeoverPath(lockPath, String(dead)), String(deadTaker));
    const release = lockDataDir(dir);
    try {
      expect(fs.readFileSync(lockPath, 'utf8')).toBe(String(process.pid));
      expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, process.pid));
    } finally {
      release();
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  test("a lock left by an earlier incarnation of this process's pid (a restarted container's PID 1 after a SIGKILL) is taken over; one of this very process is still refused", () => {
    const dir = tempDir();
    // Started 1 clock tick after boot: not this process.
    leaveLock(dir, process.pid, `1-${bootId()}`);
    const release = lockDataDir(dir);
    try {
      // Before, it said "open in this process already" until the lock was removed by hand.
      expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe(String(process.pid));
      expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, process.pid));
      expect(fs.statSync(path.join(dir, ownFile(process.pid))).ino).toBe(fs.statSync(path.join(dir, 'acta.lock')).ino);
      expect(() => lockDataDir(dir)).toThrow(expect.objectContaining({ code: 'ACTA_DATA_DIR_LOCKED', pid: process.pid, message: expect.stringContaining('open in this process already') }));
      // The refused open left the lock and its holder's own file as they were.
      expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, process.pid));
    } finally {
      release();
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  test("connect() in a restarted container's process (same pid) opens and serves the folder its killed predecessor held, which had said it did not serve it", async () => {
    const dataDir = path.join(tempDir(), 'data');
    fs.mkdirSync(dataDir);
    leaveLock(dataDir, process.pid, `1-${bootId()}`);
    fs.writeFileSync(path.join(dataDir, 'acta.unshared'), String(process.pid)); // the predecessor ran with share: false
    // Before: DataDirLockedError (this process's pid), at every start.
    const db = await connect({ dataDir });
    try {
      expect((await db.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
      expect(fs.existsSync(path.join(dataDir, 'acta.unshared'))).toBe(false);
      expect(fs.existsSync(path.join(dataDir, 'acta.sock'))).toBe(true);
      expect(fs.readdirSync(dataDir).filter((name) => name.startsWith('acta.lock')).sort()).toEqual(['acta.lock', ownFile(process.pid)]);
    } finally {
      await db.close();
    }
  }, 60_000);

  test('a lock whose pid now belongs to another live process (the pid reused) is taken over', async () => {
    const dir = tempDir();
    const other = sleeper();
    try {
      leaveLock(dir, other.pid, `1-${bootId()}`); // a holder of that pid that started 1 tick after boot
      // Before: DataDirLockedError, "in use by process <the sleeper>".
      const release = lockDataDir(dir);
      try {
        expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe(String(process.pid));
        expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, process.pid));
      } finally {
        release();
      }
    } finally {
      await other.gone();
    }
  });

  test("a live holder in another process is refused, its start time read past a ')' in its command name; once it is killed, its lock is taken over", async () => {
    const dir = tempDir();
    // Its command name `x) 1 2 3`, so /proc/<pid>/stat reads `<pid> (x) 1 2 3) S ...`.
    const holder = spawn(process.execPath, ['test/fixtures/lock-child.js', dir, String(Date.now())], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ACTA_TEST_COMM: 'x) 1 2 3' } });
    try {
      await new Promise<void>((resolve) => holder.stdout!.once('data', (d) => (expect(String(d)).toBe('HOLDS\n'), resolve())));
      expect(fs.readFileSync(`/proc/${holder.pid}/stat`, 'utf8')).toMatch(/^\d+ \(x\) 1 2 3\) /);
      expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, holder.pid!));
      expect(() => lockDataDir(dir)).toThrow(expect.objectContaining({ code: 'ACTA_DATA_DIR_LOCKED', pid: holder.pid }));
      expect(fs.readdirSync(dir).sort()).toEqual(heldBy(dir, holder.pid!));
      holder.kill('SIGKILL');
      await new Promise((r) => holder.once('exit', r));
      const release = lockDataDir(dir);
      release();
      expect(fs.readdirSync(dir)).toEqual([]); // its own file went with its lock
    } finally {
      holder.kill('SIGKILL');
    }
  });

  test('an older acta\'s lock (its pid alone) is judged by the pid, as before: a live one is refused, a dead one taken over; with this process\'s own pid it is an earlier process\'s (this one records its start), taken over', async () => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'acta.lock');
    const other = sleeper();
    const dead = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
    try {
      // A container that crashed on an older acta restarts on this one, with the same pid.
      leaveLock(dir, process.pid);
      lockDataDir(dir)();
      expect(fs.readdirSync(dir)).toEqual([]);
      // An older acta killed between taking the lock and removing its own file: a second link, not named after an incarnation.
      leaveLock(dir, process.pid);
      fs.linkSync(lockPath, `${lockPath}.${process.pid}`);
      lockDataDir(dir)();
      expect(fs.readdirSync(dir)).toEqual([]);
      leaveLock(dir, other.pid);
      expect(() => lockDataDir(dir)).toThrow(expect.objectContaining({ code: 'ACTA_DATA_DIR_LOCKED', pid: other.pid }));
      leaveLock(dir, dead);
      lockDataDir(dir)();
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      await other.gone();
    }
  });
  test("a live holder in another pid namespace (another container with the folder mounted), where its pid names another process or none, is refused; once it is killed, the next one takes over", async () => {
    if (process.getuid?.() !== 0 || spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status !== 0) {
      console.log('skipped: needs root and unshare(1) to start a process in a pid namespace of its own');
      return;
    }
    const dir = tempDir();
    /** lock-child.js as PID 1 of a pid namespace of its own, as in a container; killed with unshare. */
    const contained = () => {
      const child = spawn('unshare', ['--pid', '--kill-child', '--mount-proc', process.execPath, 'test/fixtures/lock-child.js', dir, '0'], { stdio: ['pipe', 'pipe', 'inherit'] });
      const said = new Promise<string>((resolve) => child.stdout!.once('data', (d) => resolve(String(d).trim())));
      return { child, said, gone: () => (child.kill('SIGKILL'), new Promise((r) => child.once('exit', r))) };
    };
    const a = contained();
    try {
      expect(await a.said).toBe('HOLDS');
      expect(fs.readFileSync(path.join(dir, 'acta.lock'), 'utf8')).toBe('1');
      // Here its pid 1 is init, started at another time: taken for a reused pid, the lock was taken over while its holder ran.
      expect(() => lockDataDir(dir)).toThrow(expect.objectContaining({ code: 'ACTA_DATA_DIR_LOCKED', pid: 1, elsewhere: true, message: expect.stringContaining('another pid namespace') }));
      const b = contained();
      expect(await b.said).toBe('LOCKED');
      await b.gone();
    } finally {
      await a.gone();
    }
    // Killed: its lock, own file and liveness socket are left; a process of the next namespace (the container restarted) takes them over.
    const c = contained();
    try {
      expect(await c.said).toBe('HOLDS');
    } finally {
      await c.gone();
    }
    const release = lockDataDir(dir);
    release();
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe('followers and close on PGlite, in a program of its own', () => {
  /** Runs test/fixtures/follow-close.js in `mode` on a new data folder; it must exit on its own within 60 s. */
  const program = (mode: string) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-follow-'));
      const child = spawn(process.execPath, ['test/fixtures/follow-close.js', path.join(dir, 'data'), mode], {
        cwd: path.resolve(__dirname, '..'),
        env: { ...process.env, ACTA_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => {
        clearTimeout(timer);
        fs.rmSync(dir, { recursive: true, force: true });
        resolve({ code, stdout, stderr: stderr.slice(0, 2000) });
      });
    });

  test('result of a job, result of a missing id, worker.stop(), db.close(): the program exits 0, with nothing left to reject', async () => {
    expect(await program('sequence')).toEqual({ code: 0, stdout: 'result {"greeting":"hello, Ada"}\nmissing ACTA_JOB_NOT_FOUND\nclosed\n', stderr: '' });
  }, 90_000);

  test('db.close() under an open observe and result ends both with DbClosedError, a later result rejects alike, and the program exits 0', async () => {
    expect(await program('open')).toEqual({ code: 0, stdout: 'state ready\nclosed\nobserve ACTA_DB_CLOSED\nresult ACTA_DB_CLOSED\nafter close ACTA_DB_CLOSED\n', stderr: '' });
  }, 90_000);
});
