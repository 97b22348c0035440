/**
 * Graceful shutdown (docs/how-it-works.md, "Shutdown"): SIGTERM stops claiming at once, hands back
 * claimed-but-unstarted rows at once, waits up to the shutdown timeout for running handlers, then
 * aborts the rest and hands their rows back without spending an attempt, and `acta worker`
 * exits 0. A second signal exits at once.
 */
import { createClient, createWorker, type Db, defineJob } from '../../src';
import { aroundStatements } from '../helpers/around';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import {
  enqueueWork,
  eventsFile,
  executions,
  exitWithin,
  jobs,
  readEvents,
  spawnWorker,
  useFaultServer,
} from './harness';

const H = 1000;
const server = useFaultServer();
beforeEach(() => server.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions'));

test('SIGTERM: running jobs get the shutdown timeout, then go back uncharged; unclaimed ones stay untouched; exit 0', async () => {
  const events = eventsFile();
  const w = spawnWorker({ dbUrl: server.dbUrl, events, args: ['--heartbeat', String(H), '--executors', '4', '--shutdown-timeout', '2500'] });
  const workerId = await w.workerId();
  const ids = await enqueueWork(server, [
    { ms: 60_000, ignoreSignal: true }, // ignores its AbortSignal
    { ms: 60_000 }, // obeys it
    { ms: 1_200 }, // finishes within the shutdown timeout
    { ms: 60_000, ignoreSignal: true },
    { ms: 10 }, // never claimed: the 4 executors are busy
    { ms: 10 },
  ]);
  await waitFor(() => readEvents(events).filter((e) => e.event === 'start').length === 4, 'four handlers to start');

  w.kill('SIGTERM');
  const exit = await w.exited;
  expect(exit).toEqual({ code: 0, signal: null });
  const aborting = await w.waitForLog('shutdown timeout: aborting running handlers', 1);
  // The line names the jobs it hands back, to follow them to their next worker.
  expect([...(aborting.jobIds as string[])].sort()).toEqual([ids[0], ids[1], ids[3]].sort());

  const rows = await jobs(server);
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const id of [ids[0], ids[1], ids[3]]) {
    expect(byId.get(id)).toMatchObject({ status: 'ready', attempts: 0, execution: 1, started: false });
  }
  expect(byId.get(ids[2])).toMatchObject({ status: 'succeeded', attempts: 1, execution: 1 });
  for (const id of [ids[4], ids[5]]) expect(byId.get(id)).toMatchObject({ status: 'ready', attempts: 0, execution: 0 });
  expect(await executions(server)).toEqual([
    { job_id: ids[0], execution: 1, worker_id: workerId, outcome: 'handed_back', charged: false },
    { job_id: ids[1], execution: 1, worker_id: workerId, outcome: 'handed_back', charged: false },
    { job_id: ids[2], execution: 1, worker_id: workerId, outcome: 'succeeded', charged: true },
    { job_id: ids[3], execution: 1, worker_id: workerId, outcome: 'handed_back', charged: false },
  ]);
  // The obedient handler saw its signal abort with the reason 'shutdown'.
  expect(readEvents(events).filter((e) => e.event === 'abort')).toEqual(
    expect.arrayContaining([expect.objectContaining({ jobId: ids[1], reason: 'shutdown' })]),
  );
  const [me] = await server.query<{ status: string }>('select status from acta.workers where id = $1', [workerId]);
  expect(me.status).toBe('stopped');
});

test('a second signal exits at once, without waiting for the shutdown timeout', async () => {
  const events = eventsFile();
  const w = spawnWorker({ dbUrl: server.dbUrl, events, args: ['--heartbeat', String(H), '--executors', '2', '--shutdown-timeout', '60000'] });
  await w.workerId();
  await enqueueWork(server, [{ ms: 60_000, ignoreSignal: true }]);
  await waitFor(() => readEvents(events).some((e) => e.event === 'start'), 'the handler to start');
  w.kill('SIGTERM');
  await w.waitForLog('signal: stopping gracefully');
  w.kill('SIGTERM');
  const exit = await exitWithin(w, 10_000);
  expect(exit).toEqual({ code: 1, signal: null });
  await w.waitForLog('second signal: exiting at once', 1);
});

describe('in-process stop()', () => {
  let tdb: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = tdb.open();
  });
  afterAll(() => tdb.drop());

  test('rows claimed but not started when stop() is called go back at once, uncharged, and no handler runs', async () => {
    // The claim commits, then its answer is held back while stop() is called: those rows are
    // Claimed and will never start.
    let committed!: () => void;
    const claimCommitted = new Promise<void>((resolve) => (committed = resolve));
    let release!: () => void;
    const answer = new Promise<void>((resolve) => (release = resolve));
    const slowClaims = aroundStatements(db, async (text, _params, run) => {
      const result = await run();
      if (text.includes('acta.claim_jobs') && result.rows.some((r) => (r as { job_id?: unknown }).job_id != null)) {
        committed();
        await answer;
      }
      return result;
    });
    let runs = 0;
    const never = defineJob({ name: 'never', handler: async () => void runs++ });
    const ids = (await createClient({ force: true, db }).enqueueMany([1, 2, 3].map(() => ({ definition: 'never', payload: {} })))).map((r) => r.id);
    const worker = createWorker({ db: slowClaims, definitions: [never], logger: silentLogger, executors: 4, heartbeatIntervalMs: H, shutdownTimeoutMs: 60_000 });
    await worker.start();
    await claimCommitted;
    const stopCalledAt = Date.now();
    const stopped = worker.stop();
    release();
    await stopped;
    expect(Date.now() - stopCalledAt).toBeLessThan(20_000); // not the 60 s shutdown timeout: nothing was running
    expect(runs).toBe(0);
    const { rows } = await db.query<{ id: string; status: string; attempts: number; execution: number }>(
      'select id, status, attempts, execution from acta.jobs order by id',
    );
    expect(rows).toEqual(ids.map((id) => ({ id, status: 'ready', attempts: 0, execution: 1 })));
    const ex = await db.query<{ job_id: string; outcome: string; charged: boolean }>('select job_id, outcome, charged from acta.executions order by job_id');
    expect(ex.rows).toEqual(ids.map((id) => ({ job_id: id, outcome: 'handed_back', charged: false })));
  });

  test('shutdownTimeoutMs 0: running handlers are aborted at once and their rows still go back, written before stop() resolves', async () => {
    await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions');
    let started = 0;
    const long = defineJob({
      name: 'long',
      handler: (_p, { signal }) =>
        new Promise<void>((_resolve, reject) => {
          started++;
          signal.addEventListener('abort', () => reject(new Error('aborted')));
        }),
    });
    await createClient({ force: true, db }).enqueueMany([1, 2, 3, 4].map((i) => ({ definition: 'long', payload: { i } })));
    const worker = createWorker({ db, definitions: [long], logger: silentLogger, executors: 4, shutdownTimeoutMs: 0 });
    await worker.start();
    await waitFor(async () => started === 4, 'the 4 handlers to start');
    await worker.stop();
    // Before: the finalizer was abandoned after 0 ms and 3 of 4 rows stayed Executing until recovery.
    const { rows } = await db.query<{ status: string; attempts: number }>('select status, attempts from acta.jobs');
    expect(rows).toEqual([1, 2, 3, 4].map(() => ({ status: 'ready', attempts: 0 })));
  });
});

test('SIGTERM while the worker is still retrying its start (database unreachable) exits 0 at once', async () => {
  const specifier = '../helpers/server.mjs'; // a variable: the import stays native ESM, untyped
  const { freePort } = (await import(specifier)) as { freePort: () => Promise<number> };
  const port = await freePort(); // nothing listens there
  const w = spawnWorker({ dbUrl: `postgres://postgres@127.0.0.1:${port}/none`, events: eventsFile(), args: ['--heartbeat', '1000'] });
  await w.waitForLog('the database has not been reached since the start', 15_000);
  w.kill('SIGTERM');
  expect(await exitWithin(w, 10_000)).toEqual({ code: 0, signal: null });
});
