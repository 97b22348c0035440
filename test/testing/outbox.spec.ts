// sys.outbox in virtual time (acta/testing): a worker asked for the outbox on the memory ledger, as
// a user tests a subscriber without a database (docs/outbox.md). A publish's wakeup fans out at once
// (well inside the slot's 10 s cadence); without the outbox asked, nothing fans out.
import pino from 'pino';
import { createClient, createWorker, defineJob, type OutboxEvent } from '../../src';
import { memoryLedger, VirtualClock } from '../../src/testing';

const silent = pino({ level: 'silent' });

async function run(outbox: boolean) {
  const clock = new VirtualClock();
  const runs: { at: number; message: unknown; key: string | null }[] = [];
  const sync = defineJob({
    name: 'sync',
    subscribe: 'account.changed',
    handler: async (e: OutboxEvent) => {
      runs.push({ at: clock.now(), message: e.message, key: e.key });
      await new Promise((resolve) => clock.scheduler.schedule(resolve, 100));
    },
  });
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const worker = createWorker({ ledger, definitions: [sync], scheduler: clock.scheduler, random: () => 0, executors: 4, heartbeatIntervalMs: 10_000, logger: silent, outbox });
  const client = createClient({ ledger, scheduler: clock.scheduler });
  await clock.await(worker.start());
  await clock.advance(2_000 - clock.now());
  await clock.await(client.publishMany([
    { topic: 'account.changed', key: 'a', message: 1 },
    { topic: 'account.changed', key: 'a', message: 2 },
    { topic: 'account.changed', key: 'b', message: 3 },
  ]));
  await clock.advance(1_000);
  const stopped = worker.stop();
  await clock.advance(5_000);
  await stopped;
  return { runs, state: ledger.state() };
}

test('a publish wakes the outbox worker: its events are fanned out and run within the second, not at the next 10 s fire; key a in order, key b beside it', async () => {
  const { runs, state } = await run(true);
  expect(runs.map((r) => r.message)).toEqual([1, 3, 2]);
  // 1 and 3 start together; 2 waits for 1 (its lane): 100 ms later.
  expect(runs[2].at - runs[0].at).toBeGreaterThanOrEqual(100);
  expect(runs.every((r) => r.at < 3_000)).toBe(true);
  expect(state.events).toEqual([]);
});

test('a worker not asked for the outbox declares no sys.outbox and fans nothing out', async () => {
  const { runs, state } = await run(false);
  expect(runs).toEqual([]);
  expect(state.events).toHaveLength(3);
  expect(state.schedules).toEqual([]);
});
