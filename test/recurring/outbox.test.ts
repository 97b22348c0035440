// sys.outbox on a real database (docs/outbox.md): events published in a rolled-back transaction
// are never delivered, those of a committed one run once per subscriber; two workers both fanning
// out at every publish deliver each event once per subscriber, one key in publish order; `acta
// publish` to an `acta worker --outbox` process (the built bin: run `npm run build` first).
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, createClient, createWorker, defineJob, type OutboxEvent } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

const count = async (sql: string, params: unknown[]) => Number((await db.query<{ n: string }>(sql, params)).rows[0].n);

it('rolled back: nothing; committed: one job per subscriber, each run once; a definition not subscribed gets none; the outbox is left empty', async () => {
  const namespace = `outbox-${randomUUID()}`;
  const seen: string[] = [];
  const mailer = defineJob({ name: 'mailer', subscribe: 'order.paid', handler: (e: OutboxEvent<{ order: number }>) => void seen.push(`mailer:${e.message.order}:${e.key}`) });
  const relay = defineJob({ name: 'relay', subscribe: ['order.paid', 'order.shipped'], handler: (e: OutboxEvent<{ order: number }>) => void seen.push(`relay:${e.message.order}:${e.topic}`) });
  const other = defineJob({ name: 'other', handler: () => void seen.push('other') });
  const worker = createWorker({ db, namespace, definitions: [mailer, relay, other], logger: silentLogger, executors: 4, outbox: true });
  await worker.start();
  try {
    const client = createClient({ db, namespace });
    await db
      .transaction(async (tx) => {
        await client.publish('order.paid', { order: 1 }, { tx });
        throw new Error('rollback');
      })
      .catch(() => undefined);
    await db.transaction(async (tx) => {
      await client.publish('order.paid', { order: 2 }, { tx, key: 'customer-7' });
      await client.publishMany([{ topic: 'order.shipped', message: { order: 2 } }], { tx });
    });
    await waitFor(async () => (await count(`select count(*) as n from acta.jobs where namespace = $1 and status = 'succeeded' and definition <> 'sys.outbox'`, [namespace])) >= 3, 'the three jobs run');
    await waitFor(async () => (await count('select count(*) as n from acta.outbox where namespace = $1', [namespace])) === 0, 'the outbox emptied');
    expect(seen.sort()).toEqual(['mailer:2:customer-7', 'relay:2:order.paid', 'relay:2:order.shipped']);
    expect(await count(`select count(*) as n from acta.jobs where namespace = $1 and definition in ('mailer', 'relay', 'other')`, [namespace])).toBe(3);
    expect(await count(`select count(*) as n from acta.executions e join acta.jobs j on j.id = e.job_id where j.namespace = $1 and j.definition in ('mailer', 'relay')`, [namespace])).toBe(3);
    expect((await client.schedules.list()).map((s) => s.name)).toEqual(['sys.outbox']);
  } finally {
    await worker.stop();
  }
}, 60_000);

it('two workers both fanning out at every publish: each of 200 events runs once per subscriber, each key in publish order', async () => {
  const namespace = `outbox-${randomUUID()}`;
  const runs = new Map<string, number>();
  const byKey = new Map<string, number[]>();
  const note = (who: string) => async (e: OutboxEvent<number>) => {
    runs.set(`${who}:${e.id}`, (runs.get(`${who}:${e.id}`) ?? 0) + 1);
    if (who === 'relay') byKey.set(e.key!, [...(byKey.get(e.key!) ?? []), e.message]);
  };
  const defs = () => [defineJob({ name: 'relay', subscribe: 'tick', handler: note('relay') }), defineJob({ name: 'audit', subscribe: 'tick', handler: note('audit') })];
  const db2 = tdb.open();
  const workers = [createWorker({ db, namespace, definitions: defs(), logger: silentLogger, executors: 8, outbox: { batchSize: 7 } }), createWorker({ db: db2, namespace, definitions: defs(), logger: silentLogger, executors: 8, outbox: { batchSize: 7 } })];
  await Promise.all(workers.map((w) => w.start()));
  try {
    const client = createClient({ db, namespace });
    for (let batch = 0; batch < 20; batch++) {
      await client.publishMany(Array.from({ length: 10 }, (_, i) => ({ topic: 'tick', key: `k${i % 4}`, message: batch * 10 + i })));
    }
    await waitFor(async () => runs.size >= 400, 'every event run by both subscribers', 60_000);
    await waitFor(async () => (await count('select count(*) as n from acta.jobs where namespace = $1 and definition in ($2, $3) and status <> $4', [namespace, 'relay', 'audit', 'succeeded'])) === 0, 'all ended');
    expect(runs.size).toBe(400);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    for (const [key, messages] of byKey) {
      expect({ key, messages }).toEqual({ key, messages: [...messages].sort((a, b) => a - b) });
    }
    expect(await count('select count(*) as n from acta.jobs where namespace = $1 and definition in ($2, $3)', [namespace, 'relay', 'audit'])).toBe(400);
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}, 120_000);

it('bad input is refused before anything is written: topic, key, message, options, subscribe', async () => {
  const namespace = `outbox-${randomUUID()}`;
  const client = createClient({ db, namespace });
  await expect(client.publish('', 1)).rejects.toThrow(ConfigError);
  await expect(client.publish('t', 1, { key: 'x'.repeat(701) })).rejects.toThrow(ConfigError);
  await expect(client.publish('t', 1, { keys: 'x' } as never)).rejects.toThrow(ConfigError);
  await expect(client.publish('t', 'nul \u0000')).rejects.toMatchObject({ code: 'ACTA_INVALID_JSON' });
  // A message past 1 MiB: its fan-out to many subscribers would pass 256 MiB of jsonb in one call.
  await expect(client.publish('t', 'x'.repeat(1_048_575))).rejects.toMatchObject({ code: 'ACTA_INVALID_JSON', message: expect.stringContaining('1048577 bytes, more than the 1048576 an event message may hold') });
  await expect(client.publishMany([{ topic: 't', message: 1 }, { topic: 't', message: 'x'.repeat(1_048_575) }])).rejects.toMatchObject({ item: 1 });
  await expect(client.publishMany([{ topic: 't', message: 1 }, { topic: 't', message: () => 1 }])).rejects.toMatchObject({ item: 1, message: expect.stringMatching(/^publishMany item 1: /) });
  // Refusals reject, as enqueueMany's do: a caller's .catch sees them (none throws at the call).
  for (const call of [() => client.publishMany(null as never), () => client.publishMany({ topic: 't', message: 1 } as never), () => client.publishMany([], { txn: 1 } as never)]) {
    let promise: Promise<unknown> | undefined;
    expect(() => (promise = call())).not.toThrow();
    await expect(promise).rejects.toThrow(ConfigError);
  }
  expect(await count('select count(*) as n from acta.outbox where namespace = $1', [namespace])).toBe(0);
  // A received event's key is null when it has none: passed back as it came, it means no key.
  await client.publish('t', 1, { key: null });
  await client.publishMany([{ topic: 't', message: 2, key: null }]);
  expect(await count('select count(*) as n from acta.outbox where namespace = $1 and key is null', [namespace])).toBe(2);
  expect(() => defineJob({ name: 'x', subscribe: [], handler: () => null })).toThrow(ConfigError);
  expect(() => defineJob({ name: 'x', subscribe: 't', lane: () => 'l', handler: () => null })).toThrow(/lane function/);
  expect(() => defineJob({ name: 'x', subscribe: 't', concurrency: { limit: 1, key: () => 'k' }, handler: () => null })).toThrow(/concurrency.key/);
  expect(() => createWorker({ db, namespace, definitions: [defineJob({ name: 'x', handler: () => null })], outbox: { batchSize: 0 } })).toThrow(ConfigError);
});

it('acta publish to an acta worker --outbox process: its subscriber runs the event; a message that is not JSON exits 1', async () => {
  const namespace = `outbox-${randomUUID()}`;
  const bin = path.join(__dirname, '../../bin/acta.js');
  const env = { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' };
  const child = spawn(process.execPath, [bin, 'worker', 'test/fixtures/outbox-jobs.js', '--namespace', namespace, '--outbox', '--heartbeat', '1000'], { cwd: path.join(__dirname, '../..'), env, stdio: 'ignore' });
  try {
    await waitFor(async () => (await count(`select count(*) as n from acta.workers where namespace = $1 and status = 'alive'`, [namespace])) === 1, 'the worker registers', 30_000);
    const run = (...args: string[]) => promisify(execFile)(process.execPath, [bin, ...args], { env });
    const { id } = JSON.parse((await run('publish', 'cli.topic', '{"n":1}', '--key', 'k1', '--namespace', namespace)).stdout) as { id: string };
    expect(id).toMatch(/^[1-9][0-9]*$/);
    await waitFor(async () => (await count(`select count(*) as n from acta.jobs where namespace = $1 and definition = 'cli-relay' and status = 'succeeded'`, [namespace])) === 1, 'the relay runs', 30_000);
    const { rows } = await db.query<{ result: unknown }>(`select result from acta.jobs where namespace = $1 and definition = 'cli-relay'`, [namespace]);
    expect(rows[0].result).toMatchObject({ id, topic: 'cli.topic', key: 'k1', message: { n: 1 } });
    await expect(run('publish', 'cli.topic', '{nope', '--namespace', namespace)).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('message is not JSON') });
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}, 60_000);
