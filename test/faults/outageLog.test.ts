/**
 * What a long database outage writes to a worker's log (docs/operating.md, "Logs"): a real worker
 * process holding many attempts, and a server of the file's own stopped under it. The attempts'
 * deadline passes together (they share the last renewal's): ONE line names them all, with their
 * count and job ids, where the worker said two warnings per held attempt (the heartbeat's "attempt
 * deadline passed: aborting" and the executor's "attempt failed": 128 lines at 64 executors).
 */
import { enqueueWork, eventsFile, exitWithin, readEvents, spawnWorker, useFaultServer } from './harness';
import { waitFor } from '../helpers/wait';

const server = useFaultServer();
const H = 1_000; // lease 4 s
const N = 32;

test(`an outage longer than the lease under ${N} held attempts: one warning names them all, none names one attempt; the worker exits 1`, async () => {
  const events = eventsFile();
  const w = spawnWorker({ dbUrl: server.dbUrl, events, args: ['--heartbeat', String(H), '--executors', String(N), '--shutdown-timeout', '1000'] });
  await w.workerId();
  const ids = await enqueueWork(server, Array.from({ length: N }, () => ({ ms: 60_000 })));
  await waitFor(() => readEvents(events).filter((e) => e.event === 'start').length === N || undefined, `the ${N} handlers to start`);
  await server.stop();
  try {
    // No beat for a whole lease while it holds attempts: it stops (test/faults/heartbeatLoss.test.ts).
    expect(await exitWithin(w, 30 * H)).toEqual({ code: 1, signal: null });
  } finally {
    await server.start();
  }
  const warned = w.lines.filter((l) => l.level >= 40);
  const aborting = warned.filter((l) => l.msg === 'attempt deadlines passed: aborting the attempts');
  expect(aborting).toHaveLength(1);
  expect(aborting[0].attempts).toBe(N);
  expect([...(aborting[0].jobIds as string[])].sort()).toEqual([...ids].sort());
  // No warning or error line is about one attempt (each attempt's "attempt failed" went at debug).
  expect(warned.filter((l) => 'jobId' in l).map((l) => `${l.msg} (job ${String(l.jobId)})`)).toEqual([]);
  expect(w.lines.filter((l) => l.msg === 'attempt failed').length).toBe(N);
  // The outage's other warnings do not grow with the attempts held: the beat's retries, the
  // completion write's, the stop.
  expect(warned.length).toBeLessThan(N);
}, 90_000);
