// A signal wait's timeout on a real database with a real worker (docs/workflows.md, "Signals"):
// a SignalTimeoutError the handler lets through fails the job without retry, since the timeout is a
// recorded step that every retry's replay would throw again; one it catches goes on.
import { createClient, createWorker, defineJob, SignalTimeoutError } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase();

test('a SignalTimeoutError let through fails the job without retry; one caught goes on', async () => {
  const runs: string[] = [];
  const uncaught = defineJob({
    name: 'wf-timeout-uncaught',
    maxAttempts: 5,
    backoff: { delayMs: 100 },
    handler: async (_p: null, ctx) => {
      runs.push('uncaught');
      await ctx.waitForSignal('approve', { timeoutMs: 0 });
    },
  });
  const caught = defineJob({
    name: 'wf-timeout-caught',
    handler: async (_p: null, ctx) => {
      try {
        return await ctx.waitForSignal('approve', { timeoutMs: 0 });
      } catch (err) {
        if (err instanceof SignalTimeoutError) return 'timed out';
        throw err;
      }
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [uncaught, caught], logger: silentLogger, heartbeatIntervalMs: 100, executors: 2 });
  await worker.start();
  try {
    const a = await client.enqueue(uncaught, null);
    const b = await client.enqueue(caught, null);
    expect(await client.result(b.id, { timeoutMs: 15_000 })).toBe('timed out');
    await expect(client.result(a.id, { timeoutMs: 15_000 })).rejects.toThrow(/failed/i);
    const job = await client.getJob(a.id);
    expect(job!.error).toMatchObject({ name: 'SignalTimeoutError' });
    // One wait, then one re-run that failed for good: not 5 attempts each throwing the recorded timeout again.
    expect(job!.executions.map((e) => e.outcome)).toEqual(['signal_wait', 'failed_final']);
    expect(runs).toEqual(['uncaught', 'uncaught']);
  } finally {
    await worker.stop();
  }
});
