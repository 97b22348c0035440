/**
 * Restart the PostgreSQL server while jobs run, and keep it down longer than the reconnect back-off
 * (docs/how-it-works.md, "Database faults"): no job lost, no attempt doubled, the workers resume
 * without a restart, and NOTIFY wakeups return (a job enqueued afterwards starts far sooner than
 * the safety poll, set large here, would explain).
 */
import {
  enqueueWork,
  eventsFile,
  expectWakeupsWork,
  expectEachSucceededOnce,
  listenConnects,
  sleep,
  spawnWorker,
  waitForStatus,
  type WorkerProcess,
  useFaultServer,
  expectCleanExit,
} from './harness';
import { waitFor } from '../helpers/wait';

// H = 2 s: a lease (4 H = 8 s) comfortably outlasts the 2.5 s outage plus a slow restart on a
// loaded machine; with 1 s the worker could rightly give up (no heartbeat for a whole lease).
const H = 2000;
const SAFETY_POLL = 5_000;
const server = useFaultServer();

test('a server restart mid-run: nothing lost, nothing doubled, workers resume and wakeups return', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', String(H), '--executors', '4', '--safety-poll', String(SAFETY_POLL), '--shutdown-timeout', '1000'];
  const workers: WorkerProcess[] = [spawnWorker({ dbUrl: server.dbUrl, events, args }), spawnWorker({ dbUrl: server.dbUrl, events, args })];
  await Promise.all(workers.map((w) => w.workerId()));
  await Promise.all(workers.map((w) => waitFor(() => listenConnects(w) >= 1, 'LISTEN to connect')));

  const ids = await enqueueWork(server, Array.from({ length: 16 }, () => ({ ms: 400 })));
  await waitFor(
    async () => Number((await server.query<{ n: string }>(`select count(*) as n from acta.all_jobs where status = 'succeeded'`))[0].n) >= 2,
    'the first jobs to finish',
  );

  const running = await server.query<{ n: string }>(`select count(*) as n from acta.jobs where status = 'executing'`);
  expect(Number(running[0].n)).toBeGreaterThan(0);
  await server.stop(); // fast shutdown: every session is terminated (57P01)
  await sleep(2_500); // longer than the heartbeat's reconnect back-off (H/4 → H) and LISTEN's first retries
  await server.start();

  await waitForStatus(server, ids, 'succeeded', 'every job to succeed after the restart', 60_000);
  await expectEachSucceededOnce(server, ids);
  // The workers kept running through it: no exit, and they logged the failures they rode out.
  for (const w of workers) {
    expect(w.child.exitCode).toBeNull();
    expect(w.lines.some((l) => l.msg.includes('heartbeat failed (transient)'))).toBe(true);
  }
  await Promise.all(workers.map((w) => waitFor(() => listenConnects(w) >= 2, 'LISTEN to reconnect', 20_000)));
  await expectWakeupsWork(server, workers, SAFETY_POLL);

  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await expectCleanExit(w);
});
