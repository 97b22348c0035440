/**
 * SIGSTOP a worker past its lease, then SIGCONT (docs/DESIGN.md, "The lease clock" and "The ledger
 * (one row per job)"): meanwhile recovery returns its row and another worker completes the job;
 * once resumed, the stalled worker aborts its handler (its attempt deadline passed) and its late
 * completion is fenced out, so the job has exactly one final state.
 */
import {
  enqueueWork,
  eventsFile,
  executions,
  expectEachSucceededOnce,
  jobs,
  readEvents,
  sleep,
  spawnWorker,
  waitForStatus,
  useFaultServer,
} from './harness';
import { waitFor } from '../helpers/wait';

const H = 1000;
const server = useFaultServer();

test('a worker stalled past its lease: its late completion is fenced out and it aborts its handler', async () => {
  const events = eventsFile();
  const args = ['--heartbeat', String(H), '--executors', '2', '--shutdown-timeout', '1000'];
  const a = spawnWorker({ dbUrl: server.dbUrl, events, args });
  const aId = await a.workerId();
  const [id] = await enqueueWork(server, [{ slowOnExecution: 1, slowMs: 30_000, ms: 100 }]);
  await waitFor(() => readEvents(events).some((e) => e.event === 'start' && e.pid === a.pid), 'the first attempt to start in A');
  await waitFor(async () => (await jobs(server))[0].started, 'the start to be reported by a heartbeat', 10 * H);

  a.kill('SIGSTOP');
  try {
    const b = spawnWorker({ dbUrl: server.dbUrl, events, args });
    const bId = await b.workerId();
    await waitForStatus(server, [id], 'succeeded', 'the job to be recovered and completed by B');
    await sleep(H); // A stays stopped a little longer: its deadline and lease are long gone
    a.kill('SIGCONT');

    // The stalled handler is aborted (its deadline passed, or its lease was found lost) …
    const abort = await waitFor(
      () => readEvents(events).find((e) => e.event === 'abort' && e.pid === a.pid),
      'the stalled worker to abort its handler',
      10 * H,
    );
    expect(['deadline', 'lost']).toContain(abort.reason);
    expect(abort).toMatchObject({ jobId: id, execution: 1 });
    // … and the completion it then writes is fenced out.
    await a.waitForLog('completions fenced out', 10 * H, (l) => Array.isArray(l.jobIds) && l.jobIds.includes(id));

    await expectEachSucceededOnce(server, [id]);
    expect((await jobs(server))[0]).toMatchObject({ status: 'succeeded', attempts: 2, execution: 2, result: { pid: b.pid, execution: 2 } });
    expect(await executions(server)).toEqual([
      { job_id: id, execution: 1, worker_id: aId, outcome: 'lost', charged: true },
      { job_id: id, execution: 2, worker_id: bId, outcome: 'succeeded', charged: true },
    ]);
    // The handler never finished in A, and A's result was never stored.
    expect(readEvents(events).filter((e) => e.event === 'done').map((e) => e.pid)).toEqual([b.pid]);

    // A resumed as a healthy worker: it stops cleanly.
    a.kill('SIGTERM');
    b.kill('SIGTERM');
    expect((await a.exited).code).toBe(0);
    expect((await b.exited).code).toBe(0);
  } finally {
    a.kill('SIGCONT');
  }
});
