// Bad input gets a typed error and loses nothing (docs/reference.md, "Errors"): values of the
// wrong type given to createWorker, createClient, client.signal, client.schedules, the admin calls
// and connect, each refused with ConfigError before anything is written or started, where each
// was accepted and then failed as a raw TypeError or database error, crashed the process, hung,
// or wrote and then rejected.
import { ConfigError, createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.signals, acta.workers'));

const jobCount = async () => Number((await db.query<{ n: string }>('select count(*) as n from acta.all_jobs')).rows[0].n);
const job = defineJob({ name: 'job', handler: () => undefined });

test('createWorker refuses a redis, metricsPort, logger or metricsRegistry of the wrong kind with ConfigError, before it starts', () => {
  const worker = (options: object) => () => createWorker({ db, definitions: [job], logger: silentLogger, ...options } as never);
  // redis: 5 started, then its wakeups' subscription threw "redis.duplicate is not a function" out
  // of an RxJS callback: an uncaught exception that ended the process.
  expect(worker({ redis: 5 })).toThrow(ConfigError);
  expect(worker({ redis: {} })).toThrow(/^redis must be a Redis client \(ioredis: duplicate, subscribe, publish, on, quit\), got an object without duplicate$/);
  // metricsPort: -1, 70000 and 1.5 failed start() with a raw RangeError (ERR_SOCKET_BAD_PORT); 'x' was listened on as something else.
  for (const port of [-1, 65_536, 1.5, 'x']) expect(worker({ metricsPort: port })).toThrow(/^metricsPort must be an integer between 0 and 65535, got /);
  // logger and metricsRegistry: a raw TypeError ("settings.logger.child is not a function").
  expect(worker({ logger: {} })).toThrow(/^logger must be a pino logger \(or one with child, debug, info, warn and error\), got an object without child$/);
  expect(worker({ metricsRegistry: 5 })).toThrow(/^metricsRegistry must be a prom-client Registry, got 5$/);
  // listen: 'no' listened (only false turns it off).
  expect(worker({ listen: 'no' })).toThrow(/^listen must be a boolean, got "no"$/);
  expect(worker({ metricsPort: 0, listen: false, logger: silentLogger })).not.toThrow();
});

test('publishWakeup: one that is not a function is a ConfigError at createClient; one that throws does not reject the enqueue it follows, which committed', async () => {
  // It was called after the commit: the enqueue rejected with a raw TypeError (or the publisher's
  // own error) though its job was written, and a caller that enqueued again made a second job.
  expect(() => createClient({ db, force: true, publishWakeup: 5 as never })).toThrow(/^publishWakeup must be a function \(namespace\) => void \(redisPublisher\(redis\)\), got 5$/);
  let heard = 0;
  const throwing = createClient({ db, force: true, publishWakeup: () => {
    heard++;
    throw new Error('redis down');
  } });
  await expect(throwing.enqueue('job', {})).resolves.toMatchObject({ created: true });
  await expect(throwing.enqueueMany([{ definition: 'job', payload: {} }])).resolves.toHaveLength(1);
  expect(heard).toBe(2);
  expect(await jobCount()).toBe(2);
});

test("client.signal checks its idempotency keys as enqueue's: a NUL, a lone surrogate or more than 2,000 bytes is a ConfigError, nothing sent", async () => {
  const client = createClient({ db, force: true });
  const { id } = await client.enqueue('job', {});
  const signals = async () => Number((await db.query<{ n: string }>('select count(*) as n from acta.signals')).rows[0].n);
  // A NUL failed as a raw database error (22021); a lone surrogate was stored as U+FFFD, so
  // 'k\ud800' and 'k\udbff' were one key and the second signal was dropped as a 'duplicate'; a
  // key beyond a btree entry failed as a raw 54000.
  const long = Buffer.from(Array.from({ length: 4_500 }, (_, i) => (i * 7919) % 251)).toString('base64');
  for (const key of ['a\u0000b', 'k\ud800', 'k\udbff', long, '']) {
    await expect(client.signal(id, 'go', 1, { idempotencyKey: key })).rejects.toThrow(ConfigError);
    await expect(client.signal(id, 'go', 1, { idempotencyKey: key })).rejects.toThrow(/^signal: idempotencyKey must be /);
    // The job named by its key: a NUL failed as 22021, a lone surrogate could name the job of another key.
    await expect(client.signal({ idempotencyKey: key }, 'go', 1)).rejects.toThrow(/^signal: the job's idempotencyKey must be /);
  }
  // Both forms at once: the id was ignored and the key's job signalled.
  await expect(client.signal({ id, idempotencyKey: 'k' } as never, 'go', 1)).rejects.toThrow(/^signal: the job is \{ id \} or \{ idempotencyKey \}, not both$/);
  expect(await signals()).toBe(0);
  await expect(client.signal(id, 'go', 1, { idempotencyKey: 'k'.repeat(2_000) })).resolves.toMatchObject({ delivered: true });
  await expect(client.signal(id, 'go', 2, { idempotencyKey: 'k😀' })).resolves.toMatchObject({ delivered: true });
  expect(await signals()).toBe(2);
});

test('client.schedules: a schedule name that is not a name, and add options of the wrong kind, are ConfigErrors; nothing is changed', async () => {
  const client = createClient({ db });
  const schedules = async () => Number((await db.query<{ n: string }>('select count(*) as n from acta.schedules')).rows[0].n);
  // A NUL failed as a raw database error (22021); 5, null or '' answered "no such schedule".
  for (const name of ['a\u0000b', 5, null, '']) {
    // list(null), as list(), lists them all.
    for (const call of [client.schedules.pause, client.schedules.resume, client.schedules.trigger, client.schedules.remove, ...(name === null ? [] : [client.schedules.list])]) {
      await expect(call(name as never)).rejects.toThrow(/^schedule name must be a non-empty string without \\u0000/);
    }
  }
  // force: 'yes' forced the schedule of a definition no worker declared (only a boolean may); 5 as the options was ignored.
  await expect(client.schedules.add('nobody', { cron: '* * * * *' }, { force: 'yes' as never })).rejects.toThrow(/^schedules.add: force must be a boolean, got "yes"$/);
  await expect(client.schedules.add('nobody', { cron: '* * * * *' }, 5 as never)).rejects.toThrow(/^schedules.add takes options \{ force\? \}, got 5$/);
  expect(await schedules()).toBe(0);
  await expect(client.schedules.add('nobody', { cron: '* * * * *' }, { force: true })).resolves.toBe('added');
  await expect(client.schedules.pause('nobody')).resolves.toBe(true);
  await expect(client.schedules.list()).resolves.toHaveLength(1);
});

test('options: null is none on every client call, and anything but an object is a ConfigError, not ignored', async () => {
  const client = createClient({ db, force: true });
  const { id } = await client.enqueue('job', {});
  // null threw a raw TypeError ("Cannot read properties of null (reading 'namespace')").
  await expect(client.listJobs(null as never)).resolves.toMatchObject({ jobs: [{ id }] });
  await expect(client.listWorkers(null as never)).resolves.toEqual([]);
  await expect(client.alerts(null as never)).resolves.toEqual([]);
  await expect(client.resume(null as never)).resolves.toBe(false);
  // A number or a string was ignored (enqueue wrote the job with default options) or read as keys "0", "1".
  const calls: [string, () => Promise<unknown>][] = [
    ['enqueue', () => client.enqueue('job', {}, 5 as never)],
    ['enqueueMany', () => client.enqueueMany([{ definition: 'job', payload: {} }], 'tx' as never)],
    ['getJob', () => client.getJob(id, 5 as never)],
    ['cancel', () => client.cancel(id, true as never)],
    ['signal', () => client.signal(id, 'go', 1, 5 as never)],
    ['publish', () => client.publish('topic', 1, 5 as never)],
    ['result', () => client.result(id, 5 as never)],
    ['listJobs', () => client.listJobs(5 as never)],
    ['pause', () => client.pause('x' as never)],
  ];
  for (const [what, call] of calls) await expect(call()).rejects.toThrow(new RegExp(`^${what} takes an options object, got `));
  await expect(new Promise((resolve, reject) => client.observe(id, 5 as never).subscribe({ next: resolve, error: reject }))).rejects.toThrow(/^observe takes an options object, got 5$/);
  expect(await jobCount()).toBe(1);
  expect(Number((await db.query<{ n: string }>('select (select count(*) from acta.signals) + (select count(*) from acta.outbox) + (select count(*) from acta.pauses) as n')).rows[0].n)).toBe(0);
});

test('a backoff object with a misspelt field, and client definitions with one name twice, are ConfigErrors', () => {
  // { delayMs, maxDelay } ran with no cap (the default 1 h): the misspelt field was ignored.
  expect(() => defineJob({ name: 'j', handler: () => undefined, backoff: { delayMs: 1_000, maxDelay: 5_000 } as never })).toThrow(/^unknown field of backoff of definition "j" "maxDelay"; known: delayMs, factor, maxDelayMs$/);
  // The client kept the last of the two (its policies), where createWorker refuses them.
  const other = { name: 'job', maxAttempts: 3 };
  expect(() => createClient({ db, definitions: [job, other] })).toThrow(/^duplicate definition names: job$/);
  expect(() => defineJob({ name: 'j', handler: () => undefined, backoff: { delayMs: 1_000, factor: 3, maxDelayMs: 5_000 } })).not.toThrow();
});

test("enqueue's options: a definition or payload among them is refused, not put over the arguments; the refusal lists enqueue's own options", async () => {
  const other = defineJob({ name: 'other', handler: () => undefined });
  const client = createClient({ db, force: true, definitions: [job, other] });
  await expect(client.enqueue(job, { a: 1 }, { definition: 'other' } as never)).rejects.toThrow(/^unknown enqueue option "definition"; known: runAt, priority, maxAttempts, idempotencyKey, concurrencyKey, rateKey, lane, force, tx$/);
  await expect(client.enqueue(job, { a: 1 }, { payload: { a: 2 } } as never)).rejects.toBeInstanceOf(ConfigError);
  expect(await jobCount()).toBe(0);
});
