/**
 * A SILENT network partition between a worker and PostgreSQL (a cloud NAT that timed the flow out,
 * a cable pulled): no error, no FIN, no reset, only silence, played by the test's own proxy
 * (partitionProxy.ts) in front of a server of the file's own, with real `acta worker` processes
 * (docs/operating.md, "Workers in production", Outages; docs/how-it-works.md, "Database faults").
 */
import { execFile } from 'node:child_process';
import {
  enqueueWork,
  eventsFile,
  exitWithin,
  expectEachSucceededOnce,
  listenConnects,
  readEvents,
  ROOT,
  sleep,
  spawnWorker,
  useFaultServer,
  waitForStatus,
} from './harness';
import { usePartitionProxy } from './partitionProxy';
import { waitFor } from '../helpers/wait';

const H = 500; // lease 2 s
const server = useFaultServer();
const partitionProxy = usePartitionProxy(server);

const args = (extra: string[] = [], heartbeatMs = H) => ['--heartbeat', String(heartbeatMs), '--shutdown-timeout', '1000', '--safety-poll', '500', ...extra];

test('a worker holding attempts when the partition starts exits 1 within bounded time; a worker on a direct connection recovers its jobs, each succeeding once', async () => {
  const events = eventsFile();
  const a = spawnWorker({ dbUrl: partitionProxy().through(server.dbUrl), events, args: args(['--executors', '4']) });
  await a.workerId();
  const ids = await enqueueWork(server, [1, 2, 3, 4].map(() => ({ slowOnExecution: 1, slowMs: 60_000, ms: 50 })));
  await waitFor(() => readEvents(events).filter((e) => e.event === 'start').length === 4 || undefined, 'A to start the four handlers');
  partitionProxy().partition();
  const partitionedAt = performance.now();
  const exit = await exitWithin(a, 40 * H);
  expect(exit).toEqual({ code: 1, signal: null });
  if (process.env.ACTA_FAULT_DEBUG) console.log(`A exited ${(performance.now() - partitionedAt).toFixed(0)} ms after the partition`);
  await a.waitForLog('no heartbeat succeeded for a whole lease: stopping', 1);

  const b = spawnWorker({ dbUrl: server.dbUrl, events, args: args(['--executors', '4']) });
  await b.workerId();
  await waitForStatus(server, ids, 'succeeded', 'B to recover and complete the four jobs', 60_000);
  await expectEachSucceededOnce(server, ids);
  b.kill('SIGTERM');
  expect((await b.exited).code).toBe(0);
}, 120_000);

test('an idle worker across a partition of 3 leases claims again once the network forwards new connections, and its LISTEN connection comes back', async () => {
  const events = eventsFile();
  const w = spawnWorker({ dbUrl: partitionProxy().through(server.dbUrl), events, args: args(['--executors', '2']) });
  await w.workerId();
  await waitFor(() => listenConnects(w) >= 1 || undefined, 'LISTEN to connect');
  // Work before the partition: every pool connection has been used.
  const before = await enqueueWork(server, [{ ms: 10 }, { ms: 10 }]);
  await waitForStatus(server, before, 'succeeded', 'the first jobs');
  partitionProxy().partition();
  await sleep(3 * 4 * H);
  await w.waitForLog('heartbeat unanswered for H', 1);
  const listensBefore = listenConnects(w);
  partitionProxy().heal('new'); // the old flows stay silent for good
  const healedAt = performance.now();
  const [id] = await enqueueWork(server, [{ ms: 10 }]);
  await waitForStatus(server, [id], 'succeeded', 'the worker to claim after the heal', 30_000);
  if (process.env.ACTA_FAULT_DEBUG) console.log(`claimed ${(performance.now() - healedAt).toFixed(0)} ms after the heal`);
  await waitFor(() => listenConnects(w) > listensBefore || undefined, 'LISTEN to reconnect', 30_000);
  await expectEachSucceededOnce(server, [...before, id]);
  w.kill('SIGTERM');
  expect(await exitWithin(w, 20_000)).toEqual({ code: 0, signal: null });
}, 120_000);

test('SIGTERM to a worker cut off by a partition exits 0 within bounded time; its job is recovered once the network is back', async () => {
  const events = eventsFile();
  // H = 3 s (lease 12 s): the stop ends before the heartbeat gives up (a whole lease), which would stop it as fatal, exit 1.
  const a = spawnWorker({ dbUrl: partitionProxy().through(server.dbUrl), events, args: args(['--executors', '2'], 3_000) });
  await a.workerId();
  // Pool connections used and idle when the partition starts: the next statement may take one.
  const before = await enqueueWork(server, [{ ms: 10 }, { ms: 10 }, { ms: 10 }]);
  await waitForStatus(server, before, 'succeeded', 'the first jobs');
  const [id] = await enqueueWork(server, [{ slowOnExecution: 1, slowMs: 60_000, ms: 50 }]);
  await waitFor(() => readEvents(events).some((e) => e.jobId === id && e.event === 'start') || undefined, 'A to start the job');
  partitionProxy().partition();
  a.kill('SIGTERM');
  // Shutdown timeout 1 s, the last writes 1 s, then the stop's mark (one statement deadline, 5 s).
  expect(await exitWithin(a, 20_000)).toEqual({ code: 0, signal: null });
  await a.waitForLog('could not mark the worker stopped', 1);

  partitionProxy().heal('all');
  const b = spawnWorker({ dbUrl: server.dbUrl, events, args: args(['--executors', '2']) });
  await b.workerId();
  await waitForStatus(server, [id], 'succeeded', 'B to recover and complete the job', 60_000);
  await expectEachSucceededOnce(server, [...before, id]);
  b.kill('SIGTERM');
  expect((await b.exited).code).toBe(0);
}, 120_000);

/** `acta <args>` on `url`: its exit code ('hung' when the guard killed it) and stderr. */
function acta(argv: string[], url: string, guardMs: number): Promise<{ code: number | 'hung'; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/acta.js', ...argv], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url, ACTA_LOG_LEVEL: 'silent' }, timeout: guardMs }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 'hung') : 0, stderr });
    });
  });
}

test('`acta jobs list` through a network that goes silent after the connect fails, naming the database, rather than hang', async () => {
  partitionProxy().partitionAtFirstQuery();
  const run = await acta(['jobs', 'list'], partitionProxy().through(server.dbUrl), 60_000);
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/^acta: the database did not answer within 30000 ms: its connection was dropped .* \(the database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/acta_fault was not reached/);
}, 90_000);

test('`acta worker` whose first statement meets a silent network: the start timeout says the server took the connection but did not answer', async () => {
  partitionProxy().partitionAtFirstQuery();
  // The default H (45 s): the statement's deadline comes after the start timeout, so no error came yet.
  const w = spawnWorker({ dbUrl: partitionProxy().through(server.dbUrl), events: eventsFile(), args: ['--start-timeout', '3000'] });
  expect(await exitWithin(w, 45_000)).toEqual({ code: 1, signal: null });
  expect(w.output()).toMatch(/\nacta: the worker could not reach the database within 3000 ms of its start \(no error yet: the server took the connection but did not answer its statement in that time\); check/);
}, 60_000);

test('`acta sql` and `acta migrate` through a network that goes silent after the connect fail at their --deadline, saying what to do, rather than hang', async () => {
  const database = String.raw`\(the database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/acta_fault was not reached`;
  partitionProxy().partitionAtFirstQuery();
  const sql = await acta(['sql', 'select 1', '--deadline', '2'], partitionProxy().through(server.dbUrl), 60_000);
  expect(sql.code).toBe(1);
  expect(sql.stderr).toMatch(new RegExp(String.raw`^acta: the database did not answer within 2000 ms: its connection was dropped .*; a longer statement needs a larger --deadline <s> \(now 2\) ${database}`));

  // Migrate is one transaction: its BEGIN is the statement held.
  partitionProxy().heal('new');
  partitionProxy().partitionAtFirstQuery();
  const migrate = await acta(['migrate', '--deadline', '2'], partitionProxy().through(server.dbUrl), 60_000);
  expect(migrate.code).toBe(1);
  expect(migrate.stderr).toMatch(new RegExp(String.raw`^acta: the database did not answer within 2000 ms: its connection was dropped .*; it commits all or nothing, so acta migrate again is safe; a long migration needs a larger --deadline <s> \(now 2\) ${database}`));
  expect(await acta(['migrate'], server.dbUrl, 60_000)).toEqual({ code: 0, stderr: '' });
}, 120_000);
