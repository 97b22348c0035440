// runWorker$ (src/worker/runWorker.ts; docs/rx.md, "runWorker$(options)") in virtual time on a
// memory ledger: what its stop$ does when it is not a stream, or when it errors. The database
// cases are test/db/runWorker.test.ts.
import pino from 'pino';
import { Registry as PromRegistry } from 'prom-client';
import { BehaviorSubject, lastValueFrom, map, switchMap, throwError, timer } from 'rxjs';
import { ConfigError, createClient, defineJob, runWorker$ } from '../src';
import { memoryLedger, VirtualClock } from '../src/testing';

const silent = pino({ level: 'silent' });

test('a stop$ that is not an ObservableInput errors the stream with ConfigError, and no worker is made', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const job = defineJob({ name: 'j', handler: () => 1 });
  const recording = clock.record(runWorker$({ ledger, definitions: [job], scheduler: clock.scheduler, logger: silent, stop$: 5 as never }));
  await clock.advance(100);
  expect(recording.error?.error).toBeInstanceOf(ConfigError);
  expect((recording.error?.error as Error).message).toBe('stop$ must be an Observable, a Promise or another ObservableInput, got 5');
  // Was: the stream errored with rxjs's TypeError after start(), and the worker ran on, claiming, with nothing to stop it.
  expect(ledger.state().workers).toEqual([]);
});

test('runWorker$ without options (or not an object) errors the stream with ConfigError saying what it takes', async () => {
  for (const given of [undefined, null, 'x']) {
    const error = await lastValueFrom(runWorker$(given as never)).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/^runWorker\$ takes options: \{ db, definitions: \[\.\.\.\], stop\$\? \}, got /);
  }
});

test('a stop$ that errors stops the worker gracefully, and the stream errors with it after the stopped event', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const slow = defineJob({ name: 'slow', handler: () => lastValueFrom(timer(300, clock.scheduler)).then(() => 'ok') });
  const broke = new Error('the stop signal broke');
  const stop$ = timer(50, clock.scheduler).pipe(switchMap(() => throwError(() => broke)));
  const recording = clock.record(runWorker$({ ledger, definitions: [slow], executors: 2, scheduler: clock.scheduler, random: () => 0, logger: silent, stop$ }).pipe(map((e) => e.type)));
  await clock.advance(10);
  const client = createClient({ ledger });
  const { id } = await clock.await(client.enqueue(slow, {}));
  await clock.advance(1_000);
  // Was: the error went unhandled (thrown on a timer: a process's uncaughtException) and the worker ran on.
  const types = recording.entries.map((e) => e.value);
  expect(types.at(-2)).toBe('succeeded'); // the running attempt finished and was written
  expect(types.at(-1)).toBe('stopped');
  expect(recording.error?.error).toBe(broke);
  expect(recording.error?.at).toBe(recording.entries.at(-1)?.at);
  expect(ledger.state().workers.map((w) => w.status)).toEqual(['stopped']);
  expect((await clock.await(client.getJob(id)))?.status).toBe('succeeded');
});

test('a switchMap restart with a shared metricsRegistry: the next incarnation registers at once (the unsubscribed one has left the registry), and the old one\'s end leaves the new one\'s metrics in place', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const slow = defineJob({ name: 'slow', handler: () => lastValueFrom(timer(300, clock.scheduler)).then(() => 'ok') });
  const metricsRegistry = new PromRegistry();
  const executors$ = new BehaviorSubject(2);
  const recording = clock.record(
    executors$.pipe(
      switchMap((executors) => runWorker$({ ledger, definitions: [slow], executors, metricsRegistry, scheduler: clock.scheduler, random: () => 0, logger: silent, shutdownTimeoutMs: 1_000 })),
      map((e) => e.type),
    ),
  );
  await clock.advance(10);
  const client = createClient({ ledger });
  await clock.await(client.enqueue(slow, {}));
  await clock.advance(20);
  executors$.next(3); // the first worker stops (its attempt runs on to 300 ms), the second starts now
  await clock.advance(1_000);
  // Was: the stream errored with ConfigError ("already been registered") while the first worker stopped.
  expect(recording.error).toBeUndefined();
  expect(recording.entries.filter((e) => e.value === 'running')).toHaveLength(2);
  expect(ledger.state().workers.map((w) => w.status)).toEqual(['stopped', 'alive']);
  // The first worker's end did not remove the second's metrics (they share their names).
  const free = (await metricsRegistry.getSingleMetricAsString('acta_permits_free'));
  expect(free).toMatch(/acta_permits_free 3/);
  recording.subscription.unsubscribe();
  await clock.advance(100);
});
