// client.observe and client.result in virtual time (src/client/follow.ts), on acta/testing's
// memoryLedger (answers 1 ms after each call) with injectFaults: options read strictly (observe
// never throws; every error arrives through the Observable), and a transient error (injectFaults
// rejects with a dropped connection, 08006) ridden out until the next poll, where any other error
// ends the follower. The same on a real server restart: test/faults/followers.test.ts.
import pino from 'pino';
import { timer } from 'rxjs';
import { ConfigError, createClient, createWorker, defineJob, ResultTimeoutError } from '../src';
import { injectFaults, memoryLedger, VirtualClock } from '../src/testing';

/** A client on a memory ledger through injectFaults, in virtual time; `job` runs 200 virtual ms once `start()` is called. */
async function setup() {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const client = createClient({ ledger: faults.ledger, scheduler: clock.scheduler });
  const job = defineJob({ name: 'job', handler: () => new Promise((resolve) => timer(200, clock.scheduler).subscribe(() => resolve('done'))) });
  const { id } = await clock.await(client.enqueue(job, {}));
  const worker = createWorker({ ledger, definitions: [job], scheduler: clock.scheduler, random: () => 0, logger: pino({ level: 'silent' }) });
  return { clock, ledger, faults, client, id, start: () => clock.await(worker.start()), stop: () => clock.await(worker.stop()) };
}

test('observe never throws: a bad id or a bad option errors the Observable with ConfigError when subscribed', async () => {
  const { clock, client, id } = await setup();
  let observable: ReturnType<typeof client.observe> | undefined;
  expect(() => (observable = client.observe('abc'))).not.toThrow();
  const badId = clock.record(observable!);
  const badPoll = clock.record(client.observe(id, { pollMs: 5 }));
  const badKey = clock.record(client.observe(id, { pollMS: 100 } as never));
  for (const r of [badId, badPoll, badKey]) expect(r.error?.error).toBeInstanceOf(ConfigError);
  expect((badId.error?.error as Error).message).toMatch(/a job id is a positive integer .*got "abc"/);
  await expect(client.result('abc')).rejects.toBeInstanceOf(ConfigError);
});

test("cancelOnUnsubscribe must be true or false: 'false' is refused with ConfigError, and unsubscribing cancels nothing", async () => {
  const { clock, client, id } = await setup();
  for (const value of ['false', 1, null]) {
    const r = clock.record(client.observe(id, { cancelOnUnsubscribe: value as never }));
    await clock.advance(10);
    r.subscription.unsubscribe();
    await clock.advance(10);
    expect(r.error?.error).toEqual(new ConfigError(`observe: cancelOnUnsubscribe must be true or false, got ${value === 'false' ? '"false"' : String(value)}`));
  }
  expect(await clock.await(client.getJob(id))).toMatchObject({ status: 'ready', cancelRequestedAt: null });
  // A boolean is taken: true cancels on unsubscribe, as documented.
  const r = clock.record(client.observe(id, { cancelOnUnsubscribe: true }));
  await clock.advance(10);
  r.subscription.unsubscribe();
  await clock.advance(10);
  expect(await clock.await(client.getJob(id))).toMatchObject({ status: 'cancelled' });
});

test('a transient error of watchJob and readJob is ridden out: the follower tries again at each poll, and ends with the job', async () => {
  const { clock, faults, client, id, start, stop } = await setup();
  faults.fail(['watchJob', 'readJob'], { forMs: 1_000 });
  const states = clock.record(client.observe(id, { pollMs: 300 }));
  const result = client.result(id, { pollMs: 300 });
  await clock.advance(1_000 - clock.now());
  expect(states.entries).toEqual([]);
  expect(states.error).toBeUndefined();
  await start();
  expect(await clock.await(result)).toBe('done');
  expect(states.entries.at(-1)?.value).toMatchObject({ status: 'succeeded', result: 'done' });
  expect(states.completedAt).toBeDefined();
  // Each poll tried again (at 300, 600, 900 ms the calls failed); the first that could answered.
  expect(states.entries[0].at).toBeGreaterThanOrEqual(1_000);
  await stop();
});

test("result's timeout passes during an outage before any read answered: ResultTimeoutError at the timeout (not the outage's error)", async () => {
  const { clock, faults, client, id } = await setup();
  faults.fail(['watchJob', 'readJob'], { forMs: 10_000 });
  const calledAt = clock.now();
  const result = client.result(id, { pollMs: 100, timeoutMs: 500 });
  let settledAt: number | undefined;
  result.catch(() => undefined).finally(() => (settledAt = clock.now()));
  await expect(clock.await(result)).rejects.toEqual(new ResultTimeoutError(id, 500));
  expect(settledAt).toBe(calledAt + 500);
});

test('an error that is not transient ends the follower with that error', async () => {
  const { clock, ledger, id } = await setup();
  const broken = new Error('permission denied for table jobs');
  const client = createClient({ ledger: { ...ledger, readJob: () => Promise.reject(broken) }, scheduler: clock.scheduler });
  const r = clock.record(client.observe(id, { pollMs: 100 }));
  await clock.advance(10);
  expect(r.error).toEqual({ at: 1, error: broken });
});
