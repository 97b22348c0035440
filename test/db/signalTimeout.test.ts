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
  const worker = createWorker({ db, definitions: [uncaught, caught], logger: silentLogger, heartbeatIntervalMs: 500, executors: 2 });
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

test('a wait of an attempt already cancelled throws JobCancelledError, as a step does, not the internal WaitRequestedError (docs/reference.md, "Durable steps")', async () => {
  const seen: string[] = [];
  let cancelNow: (() => void) | undefined;
  const job = defineJob({
    name: 'wf-wait-after-cancel',
    handler: async (_p: null, ctx) => {
      await ctx.step('first', () => 1);
      const payload = await ctx.waitForSignal('go');
      // The re-run: the wait above answered from its record; the cancel arrives now.
      await new Promise<void>((resolve) => {
        cancelNow = resolve;
        ctx.signal.addEventListener('abort', () => resolve());
      });
      for (const call of [() => ctx.waitForSignal('go'), () => ctx.waitForSignal(['again', 'go'], { timeoutMs: 1_000 })]) {
        try {
          await call();
          seen.push('returned');
        } catch (err) {
          seen.push((err as Error).name);
        }
      }
      return payload;
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, heartbeatIntervalMs: 500 });
  await worker.start();
  try {
    const { id } = await client.enqueue(job, null);
    expect(await client.signal(id, 'go', 'payload')).toMatchObject({ delivered: true });
    for (let i = 0; i < 200 && !cancelNow; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await client.cancel(id)).toBe(true);
    await expect(client.result(id, { timeoutMs: 15_000 })).rejects.toThrow(/cancel/i);
    // The handler's waits after the abort, neither answered yet (ordinals 1 and 2).
    expect(seen).toEqual(['JobCancelledError', 'JobCancelledError']);
  } finally {
    await worker.stop();
  }
});
