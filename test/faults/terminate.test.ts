/**
 * Kill the workers' connections with pg_terminate_backend while jobs run (docs/how-it-works.md,
 * "Database faults"): every backend of the test database but the test's own, three times over. Same
 * guarantees as a server restart: no job lost, no attempt doubled, the workers resume without a
 * restart, and NOTIFY wakeups return.
 */
import {
  enqueueWork,
  eventsFile,
  expectEachSucceededOnce,
  expectWakeupsWork,
  listenConnects,
  sleep,
  spawnWorker,
  waitForStatus,
  type WorkerProcess,
  useFaultServer,
  expectCleanExit,
} from './harness';
import { waitFor } from '../helpers/wait';

const H = 1000;
const SAFETY_POLL = 5_000;
const server = useFaultServer();

const terminateOthers = () =>
  server.query<{ n: string }>(
    `select count(pg_terminate_backend(pid)) as n from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid()`,
  );

test('connections killed by pg_terminate_backend: nothing lost, nothing doubled, workers resume and wakeups return', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', String(H), '--executors', '4', '--safety-poll', String(SAFETY_POLL), '--shutdown-timeout', '1000'];
  const workers: WorkerProcess[] = [spawnWorker({ dbUrl: server.dbUrl, events, args }), spawnWorker({ dbUrl: server.dbUrl, events, args })];
  await Promise.all(workers.map((w) => w.workerId()));
  await Promise.all(workers.map((w) => waitFor(() => listenConnects(w) >= 1, 'LISTEN to connect')));

  const ids = await enqueueWork(server, Array.from({ length: 24 }, () => ({ ms: 400 })));
  await waitFor(
    async () => Number((await server.query<{ n: string }>(`select count(*) as n from acta.all_jobs where status = 'succeeded'`))[0].n) >= 2,
    'the first jobs to finish',
  );
  let killed = 0;
  for (let i = 0; i < 3; i++) {
    killed += Number((await terminateOthers())[0].n);
    await sleep(600);
  }
  // At least each worker's LISTEN connection, plus pooled ones, every time.
  expect(killed).toBeGreaterThanOrEqual(6);

  await waitForStatus(server, ids, 'succeeded', 'every job to succeed', 60_000);
  await expectEachSucceededOnce(server, ids);
  for (const w of workers) expect(w.child.exitCode).toBeNull();
  await Promise.all(workers.map((w) => waitFor(() => listenConnects(w) >= 2, 'LISTEN to reconnect', 20_000)));
  await expectWakeupsWork(server, workers, SAFETY_POLL);

  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await expectCleanExit(w);
});
