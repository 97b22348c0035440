/**
 * The LISTEN connection of a server Db (src/db/pgListener.ts) against a fake `pg.Client` that
 * holds each LISTEN's answer back or leaves probes unanswered: the catch-up `onConnect` comes only
 * once LISTEN is in effect (a catch-up claim made before could miss a NOTIFY sent in between),
 * again after each reconnect; a probe not answered in time drops the connection (a half-open
 * one never errors by itself) and a new one LISTENs; a loss is reported once, not per retry.
 * The same on a real server, with the worker: test/faults/listener.test.ts.
 */
import { EventEmitter } from 'node:events';
import { createPgDb } from '../src';

/** A promise with its resolve and reject outside. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const fake = {
  clients: [] as FakeClient[],
  /** Whether a new client's connect fails. */
  refuse: false,
  /** Whether probes are answered. */
  answerProbes: true,
};

class FakeClient extends EventEmitter {
  readonly listens: ReturnType<typeof deferred<unknown>>[] = [];
  probes = 0;
  ended = false;
  readonly connection = { stream: { destroy: () => (this.ended = true) } };
  constructor(readonly config: Record<string, unknown>) {
    super();
    fake.clients.push(this);
  }
  async connect() {
    if (fake.refuse) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  }
  escapeIdentifier(name: string) {
    return `"${name}"`;
  }
  query(text: string): Promise<unknown> {
    if (text.startsWith('LISTEN')) {
      const d = deferred<unknown>();
      this.listens.push(d);
      return d.promise;
    }
    this.probes++;
    return fake.answerProbes ? Promise.resolve({ rows: [{ '?column?': 1 }] }) : new Promise(() => undefined);
  }
  async end() {
    this.ended = true;
  }
}
jest.mock('pg', () => ({ ...jest.requireActual('pg'), Client: jest.fn((config: Record<string, unknown>) => new FakeClient(config)) }));

const flush = () => new Promise((r) => setImmediate(r));
const waitUntil = async (what: () => boolean, ms = 3_000) => {
  const until = Date.now() + ms;
  while (!what()) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

beforeEach(() => {
  fake.clients.length = 0;
  fake.refuse = false;
  fake.answerProbes = true;
});

test('PostgreSQL: onConnect fires once LISTEN has been answered, and again after each reconnect', async () => {
  const db = createPgDb({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  let connects = 0;
  let downs = 0;
  const notified: string[] = [];
  const listening = db.listen('acta_wakeup', { onNotify: (p) => notified.push(p), onConnect: () => connects++, onDown: () => downs++ });
  await flush();
  expect(connects).toBe(0); // connected, LISTEN not answered yet
  const [first] = fake.clients;
  expect(first.config).toMatchObject({ keepAlive: true });
  first.listens[0].resolve({});
  await listening;
  expect(connects).toBe(1);
  first.emit('notification', { channel: 'acta_wakeup', payload: 'default' });
  first.emit('notification', { channel: 'other', payload: 'x' });
  expect(notified).toEqual(['default']);

  first.emit('error', new Error('terminating connection due to administrator command')); // lost
  expect(downs).toBe(1);
  await waitUntil(() => fake.clients.length === 2 && fake.clients[1].listens.length === 1);
  expect(first.ended).toBe(true);
  expect(connects).toBe(1); // reconnected, LISTEN not answered yet
  fake.clients[1].listens[0].resolve({});
  await waitUntil(() => connects === 2);
  first.emit('notification', { channel: 'acta_wakeup', payload: 'late' }); // the dropped client is not heard
  expect(notified).toEqual(['default']);
  await db.close();
  expect(fake.clients[1].ended).toBe(true);
});

test('PostgreSQL: a probe left unanswered drops the connection and a new one LISTENs; refused reconnects are one loss', async () => {
  const db = createPgDb({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  let connects = 0;
  let downs = 0;
  const listening = db.listen('acta_wakeup', { onNotify: () => undefined, onConnect: () => connects++, onDown: () => downs++ }, { probeIntervalMs: 20, probeTimeoutMs: 30 });
  await flush();
  fake.clients[0].listens[0].resolve({});
  await listening;
  await waitUntil(() => fake.clients[0].probes >= 3); // answered probes keep it
  expect(fake.clients).toHaveLength(1);
  expect(downs).toBe(0);

  fake.answerProbes = false; // half-open: nothing errors, nothing answers
  fake.refuse = true; // and the first reconnects are refused
  await waitUntil(() => fake.clients.length >= 4);
  expect(fake.clients[0].ended).toBe(true);
  expect(downs).toBe(1);
  fake.refuse = false;
  fake.answerProbes = true;
  await waitUntil(() => fake.clients[fake.clients.length - 1].listens.length === 1);
  fake.clients[fake.clients.length - 1].listens[0].resolve({});
  await waitUntil(() => connects === 2);
  expect(downs).toBe(1);
  await db.close();
});

test('PostgreSQL: a first connect that fails settles listen() and keeps trying in the background', async () => {
  fake.refuse = true;
  const db = createPgDb({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  let connects = 0;
  let downs = 0;
  await db.listen('acta_wakeup', { onNotify: () => undefined, onConnect: () => connects++, onDown: () => downs++ });
  expect(downs).toBe(1);
  fake.refuse = false;
  await waitUntil(() => fake.clients.some((c) => c.listens.length === 1));
  fake.clients.find((c) => c.listens.length === 1)!.listens[0].resolve({});
  await waitUntil(() => connects === 1);
  await db.close();
});

test('PostgreSQL: a LISTEN left unanswered is a lost connection too: listen() settles, and the next connection LISTENs', async () => {
  const db = createPgDb({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  let connects = 0;
  let downs = 0;
  // The first client's LISTEN is never answered (a backend that stopped right after the connect).
  await db.listen('acta_wakeup', { onNotify: () => undefined, onConnect: () => connects++, onDown: () => downs++ }, { probeIntervalMs: 20, probeTimeoutMs: 30 });
  expect(downs).toBe(1);
  expect(fake.clients[0].ended).toBe(true);
  await waitUntil(() => fake.clients.length >= 2 && fake.clients[1].listens.length === 1);
  fake.clients[1].listens[0].resolve({});
  await waitUntil(() => connects === 1);
  await db.close();
});
