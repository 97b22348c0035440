/**
 * Riding out database outages with real worker processes and a server the test owns
 * (docs/DESIGN.md, "The lease clock"; the retry schedule itself: test/faults/heartbeat.spec.ts):
 * - an outage shorter than (attempt deadline − time since the last renewal) aborts no handler
 *   and charges no second run: the failing heartbeat's last try comes before the deadline;
 * - after a long outage the first claim comes within about 5 s of the server's return, whatever
 *   H is (the retry back-off is capped at 4 s ± 25 %, and a restored listener ends the wait);
 * - a worker that holds nothing keeps running through an outage of many leases.
 */
import {
  enqueueWork,
  eventsFile,
  expectEachSucceededOnce,
  metric,
  readEvents,
  sleep,
  spawnWorker,
  waitForStatus,
  type WorkerProcess,
  useFaultServer,
} from './harness';
import { waitFor } from '../helpers/wait';

const server = useFaultServer();

/** acta_worker_degraded of the worker serving metrics on `port`. */
const degraded = (port: number) => metric(port, 'acta_worker_degraded');

/** The job's lease expiry, as the database has it (a renewal moves it to now() + 4 H). */
const leaseOf = async (id: string) => (await server.query<{ at: Date | null }>('select lease_expires_at as at from acta.jobs where id = $1', [id]))[0].at?.getTime();

/** How long the server takes to start after a stop, ms (measured once, for the outages' timing). */
let startMs = 0;
beforeAll(async () => {
  await server.stop();
  const t = performance.now();
  await server.start();
  startMs = performance.now() - t;
});

// The server is back 2.1 H after a renewal: after the second retry of the old back-off
// (H/4, then H/2, then H: its third retry came after the deadline), before the last try (2.375 H).
// H of 2 s and more: at 1 s the server's start had 275 ms to spare, which a loaded run can take.
for (const H of [2_000, 3_000]) {
  test(`H = ${H} ms: an outage from just after a renewal to 2.1 H (the deadline is at 2.5 H) aborts nothing and runs the job once`, async () => {
    const events = eventsFile();
    const w = spawnWorker({ dbUrl: server.dbUrl, events, args: ['--heartbeat', String(H), '--executors', '2', '--shutdown-timeout', '1000'] });
    await w.workerId();
    const [id] = await enqueueWork(server, [{ ms: 6 * H }]);
    await waitFor(() => readEvents(events).some((e) => e.event === 'start'), 'the handler to start');
    // Wait for a renewal, then cut the server at once: the worst phase for the retry schedule
    // (the first failed beat comes H later, with 1.5 H left to the deadline).
    const before = await leaseOf(id);
    await waitFor(async () => ((await leaseOf(id)) !== before ? true : null), 'a renewal', 4 * H, 10);
    const renewedAt = performance.now();
    await server.stop();
    await sleep(Math.max(0, 2.1 * H - startMs - (performance.now() - renewedAt)));
    await server.start();
    const backAfterMs = performance.now() - renewedAt;
    if (process.env.ACTA_FAULT_DEBUG) console.log(`H = ${H}: back ${backAfterMs.toFixed(0)} ms after the renewal (start took ~${startMs.toFixed(0)} ms)`);
    expect(backAfterMs).toBeLessThan(2.5 * H - H / 8); // else the rule does not promise it

    await waitForStatus(server, [id], 'succeeded', 'the job to succeed', 30_000);
    await expectEachSucceededOnce(server, [id]);
    const mine = readEvents(events).filter((e) => e.jobId === id).map((e) => e.event);
    // On a mismatch, the worker's last log lines tell which beat came late, and by how much.
    const log = mine.join() === 'start,done' ? [] : w.lines.slice(-15).map((l) => JSON.stringify(l));
    expect({ events: mine, log }).toEqual({ events: ['start', 'done'], log: [] });
    // The outage was seen: the heartbeat failed and was retried.
    expect(w.lines.some((l) => l.msg.includes('heartbeat failed (transient)'))).toBe(true);
    expect(w.lines.filter((l) => l.msg.includes('attempt deadline passed'))).toEqual([]);
    w.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
  });
}

test('after a long outage every idle worker claims within about 5 s of the server\'s return, whatever its H, and one that holds nothing outlives many leases', async () => {
  const events = eventsFile();
  const common = ['--executors', '2', '--shutdown-timeout', '1000', '--safety-poll', '1000'];
  const spawn = (namespace: string, H: number, listen: boolean): WorkerProcess =>
    spawnWorker({ dbUrl: server.dbUrl, events, args: [...common, '--namespace', namespace, '--heartbeat', String(H), '--metrics-port', '0', ...(listen ? [] : ['--no-listen'])] });
  // H = 12 s: before the cap its back-off grew 1, 2, 4, 8, 12 s; H = 1 s: lease 4 s, far shorter than the outage.
  const workers = { listening: spawn('a', 12_000, true), polling: spawn('b', 12_000, false), short: spawn('c', 1_000, false) };
  await Promise.all(Object.values(workers).map((w) => w.workerId()));
  const port = (await workers.polling.waitForLog('worker started')).metricsPort as number;
  expect(await degraded(port)).toBe(0);
  // A job that finishes during the outage: its completion write fails until the server is back.
  const [during] = await enqueueWork(server, [{ ms: 1_500 }], 25, 'b');
  await waitFor(() => readEvents(events).some((e) => e.jobId === during && e.event === 'start'), 'the job to start');

  await server.stop();
  try {
    // Every worker's heartbeat has failed (a beat fell in the outage) …
    await Promise.all(Object.values(workers).map((w) => w.waitForLog('heartbeat failed (transient)', 20_000)));
    // … and keeps failing long enough for an uncapped back-off to reach 8-16 s.
    await sleep(16_000);
    expect(await degraded(port)).toBe(1);
  } finally {
    await server.start();
  }
  const backAt = Date.now();
  const ids = {
    listening: (await enqueueWork(server, [{ ms: 10 }], 25, 'a'))[0],
    polling: (await enqueueWork(server, [{ ms: 10 }], 25, 'b'))[0],
    short: (await enqueueWork(server, [{ ms: 10 }], 25, 'c'))[0],
  };
  await waitForStatus(server, [...Object.values(ids), during], 'succeeded', 'each namespace\'s job to run', 30_000);
  // The waiting completion write was repeated once the heartbeat succeeded again, not after its
  // back-off (which had grown to 8-16 s).
  const [written] = await server.query<{ at: Date }>('select finished_at as at from acta.all_executions where job_id = $1', [during]);
  const writtenAfterMs = written.at.getTime() - backAt;
  const claimedAfterMs: Record<string, number> = {};
  for (const [name, id] of Object.entries(ids)) {
    const [row] = await server.query<{ at: Date }>('select claimed_at as at from acta.all_executions where job_id = $1', [id]);
    claimedAfterMs[name] = row.at.getTime() - backAt;
  }
  if (process.env.ACTA_FAULT_DEBUG) console.log(`claimed after the server's return (ms): ${JSON.stringify(claimedAfterMs)}; the outage's completion written after ${writtenAfterMs} ms`);
  // The cap (5 s with its jitter), plus a claim round; the restored listener is not slower.
  for (const ms of Object.values(claimedAfterMs)) expect(ms).toBeLessThan(6_500);
  expect(writtenAfterMs).toBeLessThan(6_500);

  await waitFor(async () => ((await degraded(port)) === 0 ? true : null), 'acta_worker_degraded 0 again', 5_000);

  // The short-H worker held nothing through 7 of its leases: it kept running and said why.
  expect(workers.short.child.exitCode).toBeNull();
  await workers.short.waitForLog('holds no attempts, so it keeps trying', 1);
  // The listening one logged the lost and restored listener at info (30), with how long it was down.
  const restored = await workers.listening.waitForLog('LISTEN connected', 10_000, (l) => typeof l.downMs === 'number');
  expect(restored.level).toBe(30);
  expect((await workers.listening.waitForLog('LISTEN connection lost', 1)).level).toBe(30);

  for (const w of Object.values(workers)) w.kill('SIGTERM');
  for (const w of Object.values(workers)) expect((await w.exited).code).toBe(0);
}, 120_000);
