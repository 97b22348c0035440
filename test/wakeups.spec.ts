import { EventEmitter } from 'node:events';
import { createPgDb, type RedisLike } from '../src';
import { redisWakeups } from '../src/wakeups';
import { silentLogger } from './helpers/silentLogger';

// A (re)connect's catch-up claim must come after LISTEN / SUBSCRIBE is in effect: one made
// before could miss a wakeup sent in between, whose job then waits for the safety poll. (Found
// as a flaky test/db/retryWake.test.ts: its worker's safety poll is 60 s.) Neither pg-listen nor
// ioredis orders it so on its own; these fakes hold the LISTEN / SUBSCRIBE answer back.

/** A promise with its resolve outside. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** pg-listen's subscriber as pg-listen 1.7 behaves: 'connected' is emitted inside connect(), before any LISTEN. */
const fakeSubscriber = {
  events: new EventEmitter(),
  notifications: new EventEmitter(),
  listen: deferred(),
  async connect() {
    this.events.emit('connected');
  },
  listenTo(_channel: string) {
    return this.listen.promise;
  },
  async close() {},
};
jest.mock('pg-listen', () => ({ __esModule: true, default: () => fakeSubscriber }));

const flush = () => new Promise((r) => setImmediate(r));

test('PostgreSQL: onConnect fires once LISTEN has been answered, and again after each reconnect', async () => {
  const db = createPgDb({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  let connects = 0;
  const listening = db.listen('acta_wakeup', { onNotify: () => undefined, onConnect: () => connects++ });
  await flush();
  expect(connects).toBe(0); // connected, LISTEN not answered yet
  fakeSubscriber.listen.resolve();
  await listening;
  expect(connects).toBe(1);
  fakeSubscriber.events.emit('connected'); // pg-listen after a reconnect: re-LISTENed, then 'connected'
  expect(connects).toBe(2);
  await db.close();
});

/** An ioredis-like client whose 'ready' comes before the SUBSCRIBE is answered, as ioredis' does. */
class FakeRedis extends EventEmitter {
  readonly subscribes: { promise: Promise<void>; resolve: () => void }[] = [];
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
