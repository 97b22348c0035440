// worker.start() against a database it cannot reach, in virtual time (WorkerOptions.startTimeoutMs):
// the first failure is logged at once, transient errors are repeated, and the start fails with
// StartTimeoutError at startTimeoutMs, not after a lease; a database back in time lets it start.
import pino from 'pino';
import { TestScheduler } from 'rxjs/testing';
import { createWorker, defineJob, StartTimeoutError } from '../src';
import { injectFaults, memoryLedger, VirtualClock } from '../src/testing';

const job = defineJob({ name: 'job', handler: () => undefined });

/** A worker on a memory ledger whose schema check fails for `failForMs`, and the warn/error log lines with their virtual times. */
function unreachable(clock: VirtualClock, failForMs: number, startTimeoutMs?: number) {
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  faults.fail('assertReady', { forMs: failForMs });
  const lines: { at: number; level: number; msg: string }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push({ at: clock.now(), ...(JSON.parse(line) as { level: number; msg: string }) }) });
  const worker = createWorker({ ledger: faults.ledger, definitions: [job], scheduler: clock.scheduler, random: () => 0, heartbeatIntervalMs: 10_000, startTimeoutMs, logger, listen: false });
  return { ledger, worker, lines };
}

test('a database never reached: the first failure is logged at once, and start() fails with StartTimeoutError at startTimeoutMs, well within the lease', async () => {
  const clock = new VirtualClock();
  const { ledger, worker, lines } = unreachable(clock, 3_600_000, 5_000);
  const started = worker.start();
  started.catch(() => undefined);
  await clock.advance(0);
  expect(lines.map((l) => [l.at, l.msg])).toEqual([[0, 'worker start: the database has not been reached since the start; repeating until startTimeoutMs']]);
  await clock.advance(4_999);
  let failed: unknown;
  started.catch((err: unknown) => (failed = err));
  await clock.advance(0);
  expect(failed).toBeUndefined();
  // Repeated meanwhile (back-off 1 s, then 2 s, capped by H and 4 s): each repeat logged.
  expect(lines.filter((l) => l.level === 40).length).toBeGreaterThan(1);
  await clock.advance(1);
  expect(failed).toBeInstanceOf(StartTimeoutError);
  expect((failed as StartTimeoutError).code).toBe('ACTA_START_TIMEOUT');
  expect((failed as StartTimeoutError).message).toMatch(/could not reach the database within 5000 ms of its start \(last error: Connection terminated unexpectedly/);
  expect(lines.at(-1)).toMatchObject({ at: 5_000, level: 50 });
  // Nothing was registered, and nothing is tried after the failure.
  const tries = lines.length;
  await clock.advance(60_000);
  expect(lines.length).toBe(tries);
  expect(await clock.await(ledger.readJob('default', '1'))).toBeNull();
  await clock.await(worker.done);
});

test('the default start timeout is 30 s', async () => {
  const clock = new VirtualClock();
  const { worker } = unreachable(clock, 3_600_000);
  let failed: unknown;
  worker.start().catch((err: unknown) => (failed = err));
  await clock.advance(29_999);
  expect(failed).toBeUndefined();
  await clock.advance(1);
  expect(failed).toBeInstanceOf(StartTimeoutError);
});

test('a database reached before the start timeout: the worker starts', async () => {
  const clock = new VirtualClock();
  const { worker, lines } = unreachable(clock, 1_000, 5_000);
  await clock.await(worker.start());
  expect(lines.every((l) => l.level === 40)).toBe(true);
  expect(lines.length).toBeGreaterThan(0);
  await clock.advance(10_000); // past the start timeout: nothing fires
  const stopped = worker.stop();
  await clock.await(stopped);
});

test("a worker on an rxjs TestScheduler: the start's timeout names the scheduler and VirtualClock, not the database address (docs/reference.md, Worker, scheduler)", async () => {
  // TestScheduler.run flushes every action in one synchronous call: the start's timeout fires
  // before the memory ledger's answer can settle as a promise.
  const scheduler = new TestScheduler(() => undefined);
  let started!: Promise<void>;
  scheduler.run(() => {
    const ledger = memoryLedger({ scheduler, latencyMs: 1 });
    started = createWorker({ ledger, definitions: [job], scheduler, logger: pino({ level: 'silent' }) }).start();
  });
  const failed = await started.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(failed).toBeInstanceOf(StartTimeoutError);
  expect((failed as Error).message).toMatch(/TestScheduler/);
  expect((failed as Error).message).toMatch(/VirtualClock/);
  expect((failed as Error).message).not.toMatch(/DATABASE_URL/);
});
