/**
 * kill -9 a worker mid-job (docs/DESIGN.md, "The lease clock" and "Delivery"): its rows run out
 * their lease, a recovery pass returns them (charged once, since their start was reported), another
 * worker completes them; the killed worker, restarted at once, is a new identity and never renews
 * its old rows.
 */
import {
  enqueueWork,
  eventsFile,
  executions,
  expectEachSucceededOnce,
  jobs,
  readEvents,
  spawnWorker,
  waitForStatus,
  useFaultServer,
} from './harness';
import { waitFor } from '../helpers/wait';

const H = 1000;
const server = useFaultServer();

test('kill -9 mid-job: another worker completes each job after the lease, attempts rise by at most one', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', String(H), '--executors', '4', '--shutdown-timeout', '1000'];
  const a = spawnWorker({ dbUrl: server.dbUrl, events, args });
  const aId = await a.workerId();
  // The first attempt of each job hangs (it would take a minute); later attempts take 100 ms.
  const ids = await enqueueWork(server, [1, 2, 3].map(() => ({ slowOnExecution: 1, slowMs: 60_000, ms: 100 })));
  await waitFor(() => readEvents(events).filter((e) => e.event === 'start' && e.pid === a.pid).length === 3, 'three starts in worker A');
  // A heartbeat has reported the starts: the lost attempts will be charged.
  await waitFor(async () => (await jobs(server)).every((j) => j.started), 'the starts to be reported by a heartbeat', 10 * H);

  a.kill('SIGKILL');
  expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
  // Restarted at once, plus a second worker.
  const a2 = spawnWorker({ dbUrl: server.dbUrl, events, args });
  const b = spawnWorker({ dbUrl: server.dbUrl, events, args });
  const [a2Id, bId] = await Promise.all([a2.workerId(), b.workerId()]);
  expect(new Set([aId, a2Id, bId]).size).toBe(3);

  await waitForStatus(server, ids, 'succeeded', 'the jobs to succeed on the other workers');
  await expectEachSucceededOnce(server, ids);
  for (const job of await jobs(server)) {
    expect(job).toMatchObject({ status: 'succeeded', attempts: 2, execution: 2 });
  }
  const ex = await executions(server);
  for (const id of ids) {
    const [lost, won] = ex.filter((e) => e.job_id === id);
    // The killed incarnation's attempt was returned by recovery, not renewed by its successor.
    expect(lost).toMatchObject({ execution: 1, worker_id: aId, outcome: 'lost', charged: true });
    expect(won).toMatchObject({ execution: 2, outcome: 'succeeded', charged: true });
    expect([a2Id, bId]).toContain(won.worker_id);
  }
  // Each job ran again exactly once, in a live process.
  const reruns = readEvents(events).filter((e) => e.event === 'done');
  expect(reruns.map((e) => e.jobId).sort()).toEqual([...ids].sort());
  expect(reruns.every((e) => e.pid === a2.pid || e.pid === b.pid)).toBe(true);

  // The silent incarnation is marked dead after 7 H; the live ones are not.
  await waitFor(
    async () => (await server.query<{ status: string }>('select status from acta.workers where id = $1', [aId]))[0]?.status === 'dead',
    'the killed worker to be marked dead',
    20 * H,
    100,
  );
  const alive = await server.query<{ id: string }>(`select id from acta.workers where status = 'alive' order by id`);
  expect(alive.map((r) => r.id).sort()).toEqual([a2Id, bId].sort());

  a2.kill('SIGTERM');
  b.kill('SIGTERM');
  expect((await a2.exited).code).toBe(0);
  expect((await b.exited).code).toBe(0);
});
