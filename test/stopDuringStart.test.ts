// worker.stop() called while start() is still under way (docs/reference.md, Worker: "stop()" is
// graceful and idempotent; a stop during the start ends the start's retries at once), with
// `metricsPort`: the start opens its metrics server before it touches the database.
import { connect, createWorker, defineJob } from '../src';
import { silentLogger } from './helpers/silentLogger';

const job = defineJob({ name: 'job', handler: () => undefined });

test('stop() at once after start() with metricsPort, the database unreachable: the stop ends the start at once, not at startTimeoutMs', async () => {
  // Nothing listens on port 1: every connect is refused (transient), so the start repeats its schema check.
  const db = await connect({ url: 'postgres://postgres@127.0.0.1:1/none' });
  try {
    const worker = createWorker({ db, definitions: [job], metricsPort: 0, startTimeoutMs: 20_000, listen: false, logger: silentLogger });
    const started = worker.start().then(
      () => 'started',
      (err: unknown) => err,
    );
    await worker.stop();
    // The stop came while the metrics server opened: it missed the start's cancel and waited for
    // the start timeout, and start() then rejected with StartTimeoutError.
    expect(await started).toBe('started');
    await expect(worker.done).resolves.toBeUndefined();
    expect(worker.metricsServerPort).toBeUndefined();
  } finally {
    await db.close();
  }
}, 30_000);
