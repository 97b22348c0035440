// The contract's outbox cases (contract.ts runs them on both ledgers): acta.publish_events and
// acta.fan_out_events (docs/outbox.md): a refused publish writes nothing, each event becomes one job
// per subscribed definition exactly once (also when two fan-outs race), events of one key reach a
// subscriber one at a time in publish order, subscriptions are the applied policy's, and a paused
// sys.outbox fans out nothing.
import { randomUUID } from 'node:crypto';
import { type Definition, defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import type { PublishRows } from '../../src/db/outbox';
import type { OutboxEvent } from '../../src/recurring/outbox';
import { systemDefinitions } from '../../src/recurring/system';
import type { LedgerUnderTest } from './contract';

const LEASE_MS = 60_000;
const handler = () => undefined;
const ns = () => `outbox-${randomUUID().slice(0, 8)}`;
const events = (items: { topic: string; key?: string; message?: unknown }[]): PublishRows => ({
  topics: items.map((e) => e.topic),
  keys: items.map((e) => e.key ?? null),
  messages: items.map((e) => JSON.stringify(e.message ?? null)),
});

export function outboxCases(get: () => LedgerUnderTest): void {
  const setup = async (definitions: Definition[], build: string | null = null) => {
    const { ledger } = get();
    const namespace = ns();
    const register = async (defs: Definition[], buildOf: string | null) => {
      const workerId = randomUUID();
      await ledger.registerWorker({
        workerId,
        namespace,
        hostname: 'contract',
        pid: 1,
        definitions: defs.map((d) => d.name),
        maxAttempts: defs.map(() => null),
        leaseMs: LEASE_MS,
        build: buildOf,
        policies: Object.fromEntries(defs.map((d) => [d.name, declaredPolicy(d)])),
      });
      return workerId;
    };
    const workerId = await register(definitions, build);
    const claim = async (names: string[], limit = 100) => (await ledger.claimJobs({ namespace, workerId, definitions: names, limit, leaseMs: LEASE_MS })).rows;
    const fanOut = (limit = 100) => ledger.fanOutEvents({ namespace, limit, timeoutMs: 10_000 });
    return { ledger, namespace, workerId, register, claim, fanOut };
  };

  test('a publish the database refuses (one message jsonb cannot hold) writes no event of its batch: a fan-out finds none', async () => {
    const { ledger, namespace, fanOut, claim } = await setup([defineJob({ name: 'paid', subscribe: 'order.paid', handler })]);
    const refused = { ...events([{ topic: 'order.paid', message: { n: 1 } }]), messages: ['{"n":1}', '"\\u0000"'], topics: ['order.paid', 'order.paid'], keys: [null, null] };
    await expect(ledger.publishEvents(namespace, refused)).rejects.toMatchObject({ code: '22P05' });
    expect(await fanOut()).toEqual({ events: 0, jobs: 0 });
    expect(await claim(['paid'])).toEqual([]);
  });

  test('each event becomes one job per subscribed definition, exactly once, also when two fan-outs race; an event nobody subscribes to is dropped', async () => {
    const { ledger, namespace, fanOut, claim } = await setup([
      defineJob({ name: 'mailer', subscribe: 'order.paid', handler }),
      defineJob({ name: 'relay', subscribe: ['order.paid', 'order.shipped'], handler }),
      defineJob({ name: 'other', handler }),
    ]);
    const ids = await ledger.publishEvents(namespace, events([
      { topic: 'order.paid', message: { order: 1 } },
      { topic: 'order.shipped', message: { order: 1 } },
      { topic: 'nobody.listens', message: { order: 1 } },
    ]));
    expect(ids).toHaveLength(3);
    expect(Number(ids[0])).toBeLessThan(Number(ids[1]));
    const [a, b] = await Promise.all([fanOut(), fanOut()]);
    expect(a.events + b.events).toBe(3);
    expect(a.jobs + b.jobs).toBe(3);
    expect(await fanOut()).toEqual({ events: 0, jobs: 0 });
    const jobs = await claim(['mailer', 'relay', 'other']);
    const seen = jobs.map((r) => [r.definition, (r.payload as OutboxEvent).id, (r.payload as OutboxEvent).topic]).sort();
    expect(seen).toEqual([
      ['mailer', ids[0], 'order.paid'],
      ['relay', ids[0], 'order.paid'],
      ['relay', ids[1], 'order.shipped'],
    ]);
    const payload = jobs.find((r) => r.definition === 'mailer')!.payload as OutboxEvent;
    expect(payload).toEqual({ id: ids[0], topic: 'order.paid', key: null, message: { order: 1 }, publishedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    const job = await ledger.readJob(namespace, jobs.find((r) => r.definition === 'mailer')!.id);
    expect(job?.idempotencyKey).toBe(`acta:outbox:${ids[0].padStart(19, '0')}:mailer`);
  });

  test('events of one key reach a subscriber one at a time, in publish order, across batches; other keys and unkeyed events do not wait', async () => {
    const { ledger, namespace, workerId, fanOut, claim } = await setup([defineJob({ name: 'sync', subscribe: 'account.changed', handler })]);
    await ledger.publishEvents(namespace, events([
      { topic: 'account.changed', key: 'acc-1', message: 1 },
      { topic: 'account.changed', key: 'acc-2', message: 2 },
      { topic: 'account.changed', key: 'acc-1', message: 3 },
      { topic: 'account.changed', message: 4 },
      { topic: 'account.changed', key: 'acc-1', message: 5 },
    ]));
    // Batches of 2: the order holds across fan-out transactions.
    expect(await fanOut(2)).toEqual({ events: 2, jobs: 2 });
    expect(await fanOut(2)).toEqual({ events: 2, jobs: 2 });
    expect(await fanOut(2)).toEqual({ events: 1, jobs: 1 });
    const order: unknown[] = [];
    const first = await claim(['sync']);
    expect(first.map((r) => (r.payload as OutboxEvent).message).sort()).toEqual([1, 2, 4]);
    let running = first.filter((r) => (r.payload as OutboxEvent).key === 'acc-1');
    for (let round = 0; round < 3; round++) {
      expect(running).toHaveLength(1);
      order.push((running[0].payload as OutboxEvent).message);
      await ledger.completeExecutions(workerId, [{ id: running[0].id, execution: running[0].execution, outcome: 'succeeded', result: null, error: null, retryDelayMs: 0 }]);
      running = (await claim(['sync'])).filter((r) => (r.payload as OutboxEvent).key === 'acc-1');
    }
    expect(order).toEqual([1, 3, 5]);
    expect(running).toEqual([]);
  });

  test('subscriptions are the applied policy: a newer build that no longer subscribes gets no job; a subscriber\'s concurrency key is its name', async () => {
    const { ledger, namespace, register, fanOut, claim } = await setup([defineJob({ name: 'audit', subscribe: 'user.created', concurrency: { limit: 1 }, handler })], 'v1');
    await ledger.publishEvents(namespace, events([{ topic: 'user.created', message: 'a' }]));
    expect(await fanOut()).toEqual({ events: 1, jobs: 1 });
    const [row] = await claim(['audit']);
    expect((await ledger.readJob(namespace, row.id))?.concurrencyKey).toBe('audit');
    await register([defineJob({ name: 'audit', handler })], 'v2');
    await ledger.publishEvents(namespace, events([{ topic: 'user.created', message: 'b' }]));
    expect(await fanOut()).toEqual({ events: 1, jobs: 0 });
  });

  test('a paused sys.outbox fans out nothing, whichever pass asks (a publish wakeup too): its events wait for the resume', async () => {
    const { ledger } = get();
    const namespace = ns();
    const defs = [defineJob({ name: 'mailer', subscribe: 'order.paid', handler }), ...systemDefinitions({ ledger, namespace, outbox: true })];
    const workerId = randomUUID();
    await ledger.registerWorker({
      workerId, namespace, hostname: 'contract', pid: 1, definitions: defs.map((d) => d.name), maxAttempts: defs.map(() => null), leaseMs: LEASE_MS, build: null,
      policies: Object.fromEntries(defs.map((d) => [d.name, declaredPolicy(d)])),
    });
    const fanOut = () => ledger.fanOutEvents({ namespace, limit: 100, timeoutMs: 10_000 });
    const claim = async () => (await ledger.claimJobs({ namespace, workerId, definitions: ['mailer'], limit: 10, leaseMs: LEASE_MS })).rows;
    expect(await ledger.pauseSchedule!(namespace, 'sys.outbox', true)).toBe(true);
    const [id] = await ledger.publishEvents(namespace, events([{ topic: 'order.paid', message: { order: 1 } }]));
    expect(await fanOut()).toEqual({ events: 0, jobs: 0 });
    expect(await claim()).toEqual([]);
    expect(await ledger.pauseSchedule!(namespace, 'sys.outbox', false)).toBe(true);
    expect(await fanOut()).toEqual({ events: 1, jobs: 1 });
    expect((await claim()).map((r) => (r.payload as OutboxEvent).id)).toEqual([id]);
  });
}
