// sys.outbox in virtual time (acta/testing): a worker asked for the outbox on the memory ledger, as
// a user tests a subscriber without a database (docs/outbox.md). A publish's wakeup fans out at once
// (well inside the slot's 10 s cadence); without the outbox asked, nothing fans out.
import pino from 'pino';
import { createClient, createWorker, defineJob, type OutboxEvent } from '../../src';
import type { Ledger } from '../../src/ledger';
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

test('a backlog whose batches pass their timeout until well below the default size is fanned out: the worker\'s next pass starts at the size its last one ended with', async () => {
  // 40 events waiting when the worker starts, each 150 ms of fan-out (a 1 MB message to 10
  // subscribers on PostgreSQL 15): a batch of more than 13 passes the 2 s statement_timeout and
  // takes nothing, as acta.fan_out_events does (SQLSTATE 57014). A pass's 8 s budget has room for
  // four timeouts, 500 → 250 → 125 → 62: started at 500 each time, no pass would take any.
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const slow: Ledger = Object.create(ledger);
  slow.fanOutEvents = async (args) => {
    const cost = Math.min(args.limit, ledger.state().events.filter((e) => e.namespace === args.namespace).length) * 150;
    await new Promise((resolve) => clock.scheduler.schedule(resolve, Math.min(cost, args.timeoutMs)));
    if (cost > args.timeoutMs) throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
    return ledger.fanOutEvents(args);
  };
  const seen: unknown[] = [];
  const subscribers = Array.from({ length: 10 }, (_, i) => defineJob({ name: `s${i}`, subscribe: 'big', handler: (e: OutboxEvent) => void seen.push(e.message) }));
  const client = createClient({ ledger, scheduler: clock.scheduler });
  await clock.await(client.publishMany(Array.from({ length: 40 }, (_, i) => ({ topic: 'big', message: i }))));
  const worker = createWorker({ ledger: slow, definitions: subscribers, scheduler: clock.scheduler, random: () => 0, executors: 16, heartbeatIntervalMs: 10_000, logger: silent, outbox: true });
  await clock.await(worker.start());
  await clock.advance(60_000);
  // A pass in flight (up to its 8 s budget) ends before the stop's does.
  const stopped = worker.stop();
  await clock.advance(15_000);
  await stopped;
  expect(ledger.state().events).toEqual([]);
  expect(seen).toHaveLength(400);
});
