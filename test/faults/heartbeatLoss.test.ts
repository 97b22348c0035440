/**
 * The database gone for longer than a lease (docs/how-it-works.md, "Database faults", "A whole
 * lease without a heartbeat"): the worker claims nothing while its heartbeat fails, aborts its
 * handlers, and once no heartbeat has succeeded for a whole lease `acta worker` exits 1 for its
 * supervisor to restart it; the row it held comes back through the fleet once the database does. A
 * non-transient error (the schema is not migrated) stops the worker at once with a clear message.
 */
import { Client } from 'pg';
import { withDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';
import {
  enqueueWork,
  eventsFile,
  exitWithin,
  expectEachSucceededOnce,
  jobs,
  readEvents,
  spawnWorker,
  waitForStatus,
  useFaultServer,
} from './harness';

const H = 500; // lease 2 s
const server = useFaultServer();

test('no heartbeat for a whole lease: handlers aborted, `acta worker` exits 1; the row is recovered later', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', String(H), '--executors', '2', '--shutdown-timeout', '1000'];
  const a = spawnWorker({ dbUrl: server.dbUrl, events, args });
  await a.workerId();
  const [id] = await enqueueWork(server, [{ slowOnExecution: 1, slowMs: 60_000, ms: 50 }]);
  await waitFor(() => readEvents(events).some((e) => e.event === 'start'), 'the handler to start');

  await server.stop();
  try {
    const exit = await exitWithin(a, 30 * H + 10_000);
    expect(exit).toEqual({ code: 1, signal: null });
    // It rode out the failures for a lease first (transient: retried, logged), then gave up.
    expect(a.lines.some((l) => l.msg.includes('heartbeat failed (transient)'))).toBe(true);
    await a.waitForLog('no heartbeat succeeded for a whole lease', 1);
    await a.waitForLog('worker stopped on a fatal error: exiting 1', 1);
    // Its handler was aborted before it exited (deadline at 2.5 H, or the stop itself).
    expect(readEvents(events).filter((e) => e.event === 'abort')).toHaveLength(1);
  } finally {
    await server.start();
  }

  // The database is back: the row (still Executing under the gone worker's lease) is recovered
  // and completed by a new worker.
  const b = spawnWorker({ dbUrl: server.dbUrl, events, args });
  await b.workerId();
  await waitForStatus(server, [id], 'succeeded', 'the job to be recovered and completed');
  await expectEachSucceededOnce(server, [id]);
  expect((await jobs(server))[0].attempts).toBeLessThanOrEqual(2);
  b.kill('SIGTERM');
  expect((await b.exited).code).toBe(0);
});

test('a schema that is not migrated stops `acta worker` at once with a clear message, exit 1', async () => {
  const admin = new Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query('create database acta_empty');
  } finally {
    await admin.end();
  }
  const w = spawnWorker({ dbUrl: withDatabase(server.url, 'acta_empty'), events: eventsFile(), args: ['--heartbeat', String(H)] });
  const exit = await exitWithin(w, 15_000);
  expect(exit).toEqual({ code: 1, signal: null });
  expect(w.output()).toMatch(/acta: the acta schema is not migrated \(.*\): run `npx acta migrate` \(or `migrate\(db\)`\) first/);
});
