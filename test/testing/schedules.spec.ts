// Schedules in virtual time (acta/testing): a whole worker on the memory ledger, as a user tests a
// scheduled definition without a database (docs/schedules.md). An every-second schedule fires once
// per instant with ctx.scheduledAt; a stall longer than a cadence is caught up by the policy.
import pino from 'pino';
import { createWorker, defineJob } from '../../src';
import { memoryLedger, VirtualClock } from '../../src/testing';

const silent = pino({ level: 'silent' });

test("an every-second schedule on the memory ledger: one fire per instant, each with its ctx.scheduledAt, at its instant; a handler that outlasts 3 cadences is followed by one fire ('latest'), then on schedule", async () => {
  const clock = new VirtualClock();
  const runs: { at: number; scheduledAt: number }[] = [];
  const tick = defineJob({
    name: 'tick',
    schedule: { cron: '* * * * * *' },
    handler: async (_p: unknown, ctx) => {
      runs.push({ at: clock.now(), scheduledAt: ctx.scheduledAt!.getTime() });
      // The fire of 5 s runs 3.5 s: the instants 6, 7 and 8 s pass meanwhile.
      if (ctx.scheduledAt!.getTime() === 5_000) await new Promise((resolve) => clock.scheduler.schedule(resolve, 3_500));
    },
  });
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const worker = createWorker({ ledger, definitions: [tick], scheduler: clock.scheduler, random: () => 0, executors: 4, heartbeatIntervalMs: 10_000, logger: silent });
  await clock.await(worker.start());
  await clock.advance(12_500 - clock.now());
  const [listed] = await clock.await(ledger.listSchedules!('default', 'tick'));
  const stopped = worker.stop();
  await clock.advance(5_000);
  await stopped;

  // Armed at the start, the first instant is 1 s. Each fire starts 2 ms after its instant: the idle
  // claim's answer (nextDueInMs, from the call's now) arrives 1 ms late, so the claimer's sleep ends
  // 1 ms past the instant, and its claim answers 1 ms after that.
  expect(runs.slice(0, 5)).toEqual([1, 2, 3, 4, 5].map((s) => ({ at: s * 1_000 + 2, scheduledAt: s * 1_000 })));
  // The 5 s fire ended at 8.5 s: the instant it armed (6 s) was missed by then, skipped for the
  // latest due (8 s), which ran at once; then 9, 10, 11 and 12 s on schedule.
  expect(runs.slice(5).map((r) => r.scheduledAt)).toEqual([8_000, 9_000, 10_000, 11_000, 12_000]);
  const fires = ledger.state().jobs.filter((j) => j.schedule === 'tick').map((j) => [j.scheduledAt, j.status]);
  expect(fires.filter(([at]) => (at as number) <= 12_000)).toEqual([
    ...[1, 2, 3, 4, 5].map((s) => [s * 1_000, 'succeeded']),
    [6_000, 'cancelled'],
    ...[8, 9, 10, 11, 12].map((s) => [s * 1_000, 'succeeded']),
  ]);
  expect(ledger.state().executions.filter((e) => e.outcome === 'skipped')).toHaveLength(1);
  expect(listed).toMatchObject({ name: 'tick', lastFireAt: new Date(12_000), lastOutcome: 'succeeded', nextFireAt: new Date(13_000) });
});

test('two definitions of one worker declaring schedules of one name: ConfigError at createWorker (one of them never fired: a name is one schedule in the namespace); a system schedule\'s name: ConfigError at defineJob', () => {
  const ledger = memoryLedger();
  const a = defineJob({ name: 'a', schedule: { name: 'nightly', cron: '0 2 * * *' }, handler: () => null });
  const b = defineJob({ name: 'b', schedule: [{ name: 'hourly', cron: '0 * * * *' }, { name: 'nightly', cron: '0 3 * * *' }], handler: () => null });
  expect(() => createWorker({ ledger, definitions: [a, b], logger: silent })).toThrow(/schedule "nightly" is declared by definitions a and b/);
  // A worker without the option would fire it as c's, and one with it would take the slot back.
  expect(() => defineJob({ name: 'c', schedule: { name: 'sys.retention', cron: '0 2 * * *' }, handler: () => null })).toThrow(/schedule "sys.retention" of definition "c": names beginning "sys\." are acta's system schedules/);
  expect(() => defineJob({ name: 'c', schedule: [{ name: 'ok', cron: '0 2 * * *' }, { name: 'sys.x', cron: '0 2 * * *' }], handler: () => null })).toThrow(/schedule "sys.x" of definition "c"/);
  expect(() => createWorker({ ledger, definitions: [a], logger: silent, retention: true })).not.toThrow();
  // A definition of yours named "sys.…" declares its schedule under that name by default: refused too
  // (it could not be removed at runtime, and is told to be a worker option's).
  expect(() => defineJob({ name: 'sys.nightly', schedule: { cron: '0 2 * * *' }, handler: () => null })).toThrow(/schedule "sys.nightly" of definition "sys.nightly": names beginning "sys\." are acta's system schedules/);
  expect(() => createWorker({ ledger, definitions: [a], logger: silent, retention: true, alerts: true, outbox: true })).not.toThrow();
});
