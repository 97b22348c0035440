/**
 * A half-open LISTEN connection (the server's backend behind it stopped by SIGSTOP: the socket
 * stays open, nothing errors) is found by the listener's probe (every min(10 s, H), answered
 * within 5 s: src/db/pgListener.ts), dropped and replaced; the loss and the return are logged at
 * info and counted in acta_listener_reconnects_total; NOTIFY wakeups work again afterwards
 * (acta_worker_degraded during an outage: test/faults/outage.test.ts). At the default H, so detection is the default's (about 15 s).
 */
import { expectWakeupsWork, eventsFile, metric, spawnWorker, useFaultServer } from './harness';
import { waitFor } from '../helpers/wait';

const SAFETY_POLL = 30_000;
const server = useFaultServer();

const listenerPids = async () =>
  (await server.query<{ pid: number }>(`select pid from pg_stat_activity where datname = 'acta_fault' and application_name = 'acta listener'`)).map((r) => r.pid);


test('a stopped listener backend is found within about 15 s, replaced, logged at info, and wakeups return', async () => {
  const w = spawnWorker({ dbUrl: server.dbUrl, events: eventsFile(), args: ['--safety-poll', String(SAFETY_POLL), '--metrics-port', '0'] });
  const port = (await w.waitForLog('worker started')).metricsPort as number;
  const [pid] = await waitFor(async () => {
    const pids = await listenerPids();
    return pids.length === 1 ? pids : null;
  }, 'the LISTEN connection');
  await waitFor(async () => (await metric(port, 'acta_worker_degraded')) === 0, 'the metrics server');

  process.kill(pid, 'SIGSTOP');
  const stoppedAt = performance.now();
  try {
    const lost = await w.waitForLog('LISTEN connection lost', 20_000);
    const foundMs = performance.now() - stoppedAt;
    expect(lost.level).toBe(30);
    expect(foundMs).toBeLessThan(16_000); // probe interval 10 s + timeout 5 s
    const restored = await w.waitForLog('LISTEN connected', 10_000, (l) => typeof l.downMs === 'number');
    expect(restored.level).toBe(30);
    expect(await metric(port, 'acta_listener_reconnects_total')).toBe(1);
    expect(await metric(port, 'acta_worker_degraded')).toBe(0);
    const now = await listenerPids();
    expect(now.filter((p) => p !== pid)).toHaveLength(1);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  await expectWakeupsWork(server, [w], SAFETY_POLL, 3);
  w.kill('SIGTERM');
  expect((await w.exited).code).toBe(0);
}, 90_000);
