/**
 * The LISTEN connection of a server Db (src/db/pgListener.ts) against a fake `pg.Client` that
 * holds each LISTEN's answer back or leaves probes unanswered: the catch-up `onConnect` comes only
 * once LISTEN is in effect (a catch-up claim made before could miss a NOTIFY sent in between),
 * again after each reconnect; a probe not answered in time drops the connection (a half-open
 * one never errors by itself) and a new one LISTENs; a loss is reported once, not per retry.
 * The same on a real server, with the worker: test/faults/listener.test.ts.
 */
import { EventEmitter } from 'node:events';
import { createPgDb, ListenUndeliveredError } from '../src';
import { listenOnOwnConnection, type DeliveryCheck } from '../src/db/pgListener';

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
  /** The process id of a new client's BackendKeyData, and what its `pg_backend_pid()` answers: they differ through a pooler. */
  keyPid: undefined as number | undefined,
  backendPid: undefined as number | undefined,
  /** Whether a check NOTIFY reaches the client LISTENing on its channel (a pooler in transaction mode drops it). */
  deliver: true,
};

class FakeClient extends EventEmitter {
  readonly listens: ReturnType<typeof deferred<unknown>>[] = [];
  /** Channels of the delivery checks it LISTENed on (answered at once). */
  readonly checks: string[] = [];
  probes = 0;
  ended = false;
  readonly processID = fake.keyPid;
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
    if (text.startsWith('LISTEN "acta_listen_check_')) {
      this.checks.push(text.slice('LISTEN "'.length, -1));
      return Promise.resolve({});
    }
    if (text.startsWith('select pg_backend_pid()')) {
      return fake.answerProbes ? Promise.resolve({ rows: [{ pid: fake.backendPid }] }) : new Promise(() => undefined);
    }
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
  fake.keyPid = undefined;
  fake.backendPid = undefined;
  fake.deliver = true;
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

/** A delivery check whose NOTIFY reaches the fake clients LISTENing on its channel while `fake.deliver`. */
function delivery(always: boolean): DeliveryCheck & { sent: string[] } {
  const sent: string[] = [];
  return {
    always,
    sent,
    async notify(channel) {
      sent.push(channel);
      if (fake.deliver) setImmediate(() => fake.clients.filter((c) => c.checks.includes(channel)).forEach((c) => c.emit('notification', { channel, payload: '' })));
    },
  };
}

/** The handlers of a LISTEN, counting what they hear. */
function counting() {
  const heard = { connects: 0, downs: 0, undelivered: [] as Error[] };
  const handlers = { onNotify: () => undefined, onConnect: () => heard.connects++, onDown: () => heard.downs++, onUndelivered: (err: Error) => heard.undelivered.push(err) };
  return { heard, handlers };
}

test('PostgreSQL: through a pooler that drops the check NOTIFY (transaction mode): onUndelivered once, the channel never LISTENed, no reconnect', async () => {
  fake.keyPid = 1; // the pooler's BackendKeyData
  fake.backendPid = 2;
  fake.deliver = false;
  const { heard, handlers } = counting();
  const check = delivery(false);
  const stop = await listenOnOwnConnection({}, 'acta_wakeup', handlers, { probeIntervalMs: 20, probeTimeoutMs: 30 }, check);
  expect(heard.undelivered).toHaveLength(1);
  expect(heard.undelivered[0]).toBeInstanceOf(ListenUndeliveredError);
  expect(heard).toMatchObject({ connects: 0, downs: 0 });
  const [first] = fake.clients;
  expect(check.sent).toEqual(first.checks); // its own channel, NOTIFYed through the Db
  expect(first.listens).toHaveLength(0); // no LISTEN acta_wakeup on a pooled server connection
  expect(first.ended).toBe(true);
  await new Promise((r) => setTimeout(r, 300)); // past the reconnect back-off (100 ms ±25 %)
  expect(fake.clients).toHaveLength(1);
  expect(heard.undelivered).toHaveLength(1);
  await stop();
});

test('PostgreSQL: through a pooler that delivers it (session mode): LISTEN follows the check, then onConnect', async () => {
  fake.keyPid = 1;
  fake.backendPid = 2;
  const { heard, handlers } = counting();
  const listening = listenOnOwnConnection({}, 'acta_wakeup', handlers, { probeIntervalMs: 1_000, probeTimeoutMs: 1_000 }, delivery(false));
  await waitUntil(() => fake.clients[0]?.listens.length === 1);
  expect(fake.clients[0].checks).toHaveLength(1);
  fake.clients[0].listens[0].resolve({});
  const stop = await listening;
  expect(heard).toEqual({ connects: 1, downs: 0, undelivered: [] });
  await stop();
});

test('PostgreSQL: a direct connection is not checked, unless LISTEN has a connection string of its own', async () => {
  fake.keyPid = 7;
  fake.backendPid = 7;
  for (const always of [false, true]) {
    fake.clients.length = 0;
    const check = delivery(always);
    const { heard, handlers } = counting();
    const listening = listenOnOwnConnection({}, 'acta_wakeup', handlers, { probeIntervalMs: 1_000, probeTimeoutMs: 1_000 }, check);
    await waitUntil(() => fake.clients[0]?.listens.length === 1);
    expect(check.sent).toHaveLength(always ? 1 : 0);
    fake.clients[0].listens[0].resolve({});
    const stop = await listening;
    expect(heard.connects).toBe(1);
    await stop();
  }
});
