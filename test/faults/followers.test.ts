/**
 * Followers ride out a database restart (docs/reference.md, "observe"; the transient errors are
 * src/db/transient.ts's): client.result and client.observe of a job a worker process runs, with
 * pollMs 500, while the test's own server is stopped for 3 s and started again. Neither ends with
 * the restart's error (57P01, ECONNREFUSED); both end with the job's result once it succeeded.
 */
import { lastValueFrom, toArray } from 'rxjs';
import { createClient, type JobRecord } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import { enqueueWork, eventsFile, readEvents, sleep, spawnWorker, useFaultServer, waitForStatus } from './harness';
import { waitFor } from '../helpers/wait';

const server = useFaultServer();

test('a 3 s restart while result() and observe() (pollMs 500) follow a running job: both end with its result', async () => {
  const events = eventsFile();
  // H = 4 s: the attempt deadline (2.5 H after the last renewal: 10 s) outlasts the outage and a
  // slow restart, so the handler is not aborted and the attempt not lost.
  const worker = spawnWorker({ dbUrl: server.dbUrl, events, args: ['--heartbeat', '4000', '--executors', '2', '--shutdown-timeout', '1000'] });
  await worker.workerId();
  const db = createPgDb({ connectionString: server.dbUrl });
  const client = createClient({ force: true, db });
  try {
    const [id] = await enqueueWork(server, [{ ms: 5_000 }]);
    const result = client.result<{ execution: number }>(id, { pollMs: 500, timeoutMs: 60_000 }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    const states = lastValueFrom(client.observe(id, { pollMs: 500 }).pipe(toArray())).then(
      (value: JobRecord[]) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await waitFor(() => readEvents(events).some((e) => e.event === 'start' && e.jobId === id), 'the handler to start');
    await server.stop();
    await sleep(3_000);
    await server.start();

    expect(await result).toEqual({ value: { pid: worker.pid, execution: 1 } });
    const observed = await states;
    expect(observed).not.toHaveProperty('error');
    const seen = (observed as { value: JobRecord[] }).value;
    expect(seen.at(-1)).toMatchObject({ id, status: 'succeeded', result: { pid: worker.pid, execution: 1 } });
    expect(seen.map((s) => s.status)).toContain('executing');
    await waitForStatus(server, [id], 'succeeded', 'the job to have succeeded');
  } finally {
    await db.close();
    worker.kill('SIGTERM');
    await worker.exited;
  }
}, 120_000);
