import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import pino from 'pino';
import type { RedisLike } from '../src';
import { redisWakeups } from '../src/worker/wakeups';
import { silentLogger } from './helpers/silentLogger';

// A (re)connect's catch-up claim must come after SUBSCRIBE is in effect: one made before could
// miss a wakeup sent in between, whose job then waits for the safety poll. (Found as a flaky
// test/db/retryWake.test.ts: its worker's safety poll is 60 s.) ioredis does not order it so on
// its own; these fakes hold the SUBSCRIBE answer back. The same rule for LISTEN:
// test/pgListener.spec.ts.

/** A promise with its resolve and reject outside. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (err: Error) => void } {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((r, j) => ((resolve = r), (reject = j)));
  return { promise, resolve, reject };
}

const flush = () => new Promise((r) => setImmediate(r));

/** An ioredis-like client whose 'ready' comes before the SUBSCRIBE is answered, as ioredis' does. */
class FakeRedis extends EventEmitter {
  readonly subscribes: ReturnType<typeof deferred>[] = [];
  duplicate(): RedisLike {
    return this as unknown as RedisLike;
  }
  subscribe(_channel: string): Promise<unknown> {
    const d = deferred();
    this.subscribes.push(d);
    return d.promise;
  }
  async publish() {
    return 0;
  }
  async quit() {
    return 'OK';
  }
  disconnect() {}
}

test('Redis: the catch-up wakeup of a (re)connect waits for the SUBSCRIBE to be answered', async () => {
  const redis = new FakeRedis();
  let wakeups = 0;
  const subscription = redisWakeups(redis as unknown as RedisLike, 'default', silentLogger).subscribe(() => wakeups++);
  redis.emit('ready'); // connected; the subscription not yet answered
  await flush();
  expect(wakeups).toBe(0);
  redis.subscribes[0].resolve();
  await flush();
  expect(wakeups).toBe(1);

  redis.emit('ready'); // a reconnect: ioredis resubscribes after this event
  await flush();
  expect(redis.subscribes).toHaveLength(2);
  expect(wakeups).toBe(1);
  redis.subscribes[1].resolve();
  await flush();
  expect(wakeups).toBe(2);

  redis.emit('message', 'acta:wakeup:default', '1');
  expect(wakeups).toBe(3);
  subscription.unsubscribe();
});

test('Redis: a SUBSCRIBE that failed (the server down past maxRetriesPerRequest at the start) is sent again at the next connect', async () => {
  const redis = new FakeRedis();
  let wakeups = 0;
  const subscription = redisWakeups(redis as unknown as RedisLike, 'default', silentLogger).subscribe(() => wakeups++);
  // ioredis fails the queued SUBSCRIBE (MaxRetriesPerRequestError, or at once without an offline queue).
  redis.subscribes[0].reject(new Error('Reached the max retries per request limit'));
  await flush();
  expect(wakeups).toBe(0);
  redis.emit('ready'); // the server is up
  await flush();
  expect(redis.subscribes).toHaveLength(2);
  redis.subscribes[1].resolve();
  await flush();
  expect(wakeups).toBe(1);
  redis.emit('message', 'acta:wakeup:default', '1');
  expect(wakeups).toBe(2);
  subscription.unsubscribe();
});

test('Redis: a SUBSCRIBE that the stop\'s disconnect fails (Redis down at the stop) logs no warning', async () => {
  const seen: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void seen.push(JSON.parse(line).msg) });
  const redis = new FakeRedis();
  const subscription = redisWakeups(redis as unknown as RedisLike, 'default', logger).subscribe();
  subscription.unsubscribe();
  redis.subscribes[0].reject(new Error('Connection is closed.'));
  await flush();
  expect(seen).toEqual([]);
});

test('Redis: a subscription connection that cannot connect logs one warning, not a raw ioredis error per try, and says when it is back', async () => {
  const logs: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const printed = jest.spyOn(console, 'error').mockImplementation(() => undefined);
  // Nothing listens on port 1: ioredis fails and retries every 20 ms.
  const redis = new Redis('redis://127.0.0.1:1', { retryStrategy: () => 20, maxRetriesPerRequest: null });
  redis.on('error', () => undefined); // the caller's own client (acta worker --redis does the same)
  const subscription = redisWakeups(redis as unknown as RedisLike, 'default', logger).subscribe();
  try {
    await new Promise((r) => setTimeout(r, 400));
    expect(printed.mock.calls.filter((args) => String(args[0]).includes('Unhandled error event'))).toEqual([]);
    expect(logs.filter((l) => l.msg.startsWith('Redis wakeups: the connection failed'))).toHaveLength(1);
    expect(logs[0]).toMatchObject({ level: 40 });
  } finally {
    subscription.unsubscribe();
    redis.disconnect();
    printed.mockRestore();
  }

  // Back: a fake whose connection fails, then is ready again.
  const fake = new FakeRedis();
  const seen: string[] = [];
  const fakeLogger = pino({ level: 'info' }, { write: (line: string) => seen.push(JSON.parse(line).msg) });
  const again = redisWakeups(fake as unknown as RedisLike, 'default', fakeLogger).subscribe();
  fake.emit('error', new Error('connect ECONNREFUSED'));
  fake.emit('error', new Error('connect ECONNREFUSED'));
  fake.emit('ready');
  fake.emit('error', new Error('read ECONNRESET'));
  expect(seen).toEqual([
    'Redis wakeups: the connection failed; reconnecting (the safety poll, and NOTIFY when listening, still wake the claimer)',
    'Redis wakeups: connected again',
    'Redis wakeups: the connection failed; reconnecting (the safety poll, and NOTIFY when listening, still wake the claimer)',
  ]);
  again.unsubscribe();
});

/**
 * A RedisLike adapter written to the older interface (no disconnect), answering SUBSCRIBE at once;
 * `events` lists the events its on() takes (any when absent); `extra` adds or replaces members.
 */
function adapter(options: { events?: string[]; extra?: Record<string, unknown> } = {}): RedisLike & { quits: number } {
  const emitter = new EventEmitter();
  const a = {
    quits: 0,
    duplicate: () => a,
    subscribe: async () => 1,
    on(event: string, listener: (...args: any[]) => void) { // eslint-disable-line @typescript-eslint/no-explicit-any
      if (options.events && !options.events.includes(event)) throw new Error(`unsupported event ${event}`);
      emitter.on(event, listener);
    },
    publish: async () => 0,
    quit: async () => {
      a.quits++;
      return 'OK';
    },
    ...options.extra,
  };
  return a as RedisLike & { quits: number };
}

test('Redis: a RedisLike without disconnect() (an adapter written to the older interface) is closed with quit()', async () => {
  const older = adapter();
  const subscription = redisWakeups(older, 'default', silentLogger).subscribe();
  subscription.unsubscribe();
  expect(older.quits).toBe(1);
});

test('Redis: an adapter whose on() refuses "error", or whose disconnect() rejects, ends nothing', async () => {
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    const strict = adapter({ events: ['message', 'ready'], extra: { disconnect: () => Promise.reject(new Error('The client is closed')) } });
    let wakeups = 0;
    const subscription = redisWakeups(strict, 'default', silentLogger).subscribe(() => wakeups++);
    await flush();
    expect(wakeups).toBe(1); // subscribed: the catch-up wakeup
    subscription.unsubscribe();
    await new Promise((r) => setTimeout(r, 20));
    expect(rejections).toEqual([]);
    expect(strict.quits).toBe(0); // disconnect() was preferred
  } finally {
    process.off('unhandledRejection', onRejection);
  }
});
