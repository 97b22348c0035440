/**
 * Completion writes under faults (docs/DESIGN.md, "The pipeline inside one worker", Finalizer),
 * with an in-process worker on a real PostgreSQL:
 * - outcomes that cannot be stored (NUL or a lone surrogate in jsonb, a circular or BigInt value, a Map,
 *   a thrown non-Error) never block their batch: the clean completions of the same batch land,
 *   and each poisoned job ends Failed without new attempts, with a readable error;
 * - a completion write that fails transiently is repeated while the worker holds the job (its
 *   heartbeat renewing the lease meanwhile), and the job is not run again — also when the write
 *   committed and only its answer was lost.
 */
import * as vm from 'node:vm';
import pino from 'pino';
import { createClient, createWorker, type Db, defineJob } from '../../src';
import { aroundStatements } from '../helpers/around';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.workers'));

interface Row {
  id: string;
  status: string;
  attempts: number;
  execution: number;
  result: unknown;
  error: { name?: string; message?: string } | null;
}
// acta.all_jobs, acta.all_executions: a succeeded job moves to acta.succeeded_jobs, its last attempt's record.
const rows = async () => (await db.query<Row>('select id, status, attempts, execution, result, error from acta.all_jobs order by id')).rows;
const ledger = async () =>
  (await db.query<{ job_id: string; execution: number; outcome: string; charged: boolean; finished_at: Date }>(
    'select job_id, execution, outcome, charged, finished_at from acta.all_executions order by job_id, execution',
  )).rows;

test('poisoned outcomes next to clean ones in one batch: the clean ones land, the poisoned ones end Failed without retry', async () => {
  let started = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const circular: Record<string, unknown> = { a: 1 };
  circular.self = circular;
  const outcomes: Record<string, () => unknown> = {
    clean: () => ({ ok: true }),
    nul: () => ({ text: 'a\u0000b' }),
    surrogate: () => ({ text: 'x\ud800y' }),
    circular: () => circular,
    bigint: () => ({ n: 10n }),
    map: () => ({ byId: new Map([['a', 1]]) }),
    throwString: () => {
      throw 'plain string thrown'; // eslint-disable-line no-throw-literal
    },
    throwCircular: () => {
      throw circular; // eslint-disable-line no-throw-literal
    },
  };
  const poison = defineJob<{ kind: string }>({
    name: 'poison',
    handler: async ({ kind }) => {
      started++;
      await gate;
      return outcomes[kind]();
    },
  });
  const kinds = ['clean', 'nul', 'clean', 'surrogate', 'circular', 'clean', 'bigint', 'map', 'throwString', 'throwCircular', 'clean'];
  const client = createClient({ force: true, db });
  const ids = (await client.enqueueMany(kinds.map((kind) => ({ definition: 'poison', payload: { kind }, maxAttempts: 5 })))).map((r) => r.id);
  const worker = createWorker({ db, definitions: [poison], logger: silentLogger, executors: 16, heartbeatIntervalMs: 1000 });
  await worker.start();
  try {
    await waitFor(() => started === kinds.length, 'every handler to start');
    open(); // every handler returns in the same tick: their completions share a batch
    await waitFor(async () => (await rows()).every((r) => r.status === 'succeeded' || r.status === 'failed'), 'every job to end');
  } finally {
    await worker.stop();
  }
  expect(started).toBe(kinds.length); // nothing ran twice

  const byId = new Map((await rows()).map((r) => [r.id, r]));
  const ex = await ledger();
  kinds.forEach((kind, i) => {
    const row = byId.get(ids[i])!;
    const mine = ex.filter((e) => e.job_id === ids[i]);
    if (kind === 'clean') {
      expect(row).toMatchObject({ status: 'succeeded', attempts: 1, result: { ok: true }, error: null });
      expect(mine).toMatchObject([{ execution: 1, outcome: 'succeeded', charged: true }]);
      return;
    }
    // Failed at once though 4 attempts were left, with a readable error naming the problem.
    expect(row).toMatchObject({ status: 'failed', attempts: 1, execution: 1, result: null });
    expect(mine).toMatchObject([{ execution: 1, outcome: 'failed_final', charged: true }]);
    expect(typeof row.error?.name).toBe('string');
    expect(typeof row.error?.message).toBe('string');
    expect(row.error!.message!.length).toBeGreaterThan(10);
  });
  const error = (kind: string) => byId.get(ids[kinds.indexOf(kind)])!.error!;
  expect(error('nul')).toMatchObject({ name: 'UnstorableResult', message: expect.stringMatching(/\$\.text .*\\u0000/) });
  expect(error('surrogate')).toMatchObject({ name: 'UnstorableResult', message: expect.stringMatching(/\$\.text .*lone UTF-16 surrogate/) });
  expect(error('circular')).toMatchObject({ name: 'UnstorableResult', message: expect.stringMatching(/circular/) });
  expect(error('bigint')).toMatchObject({ name: 'UnstorableResult', message: expect.stringMatching(/\$\.n .*BigInt/) });
  expect(error('map')).toMatchObject({ name: 'UnstorableResult', message: expect.stringMatching(/\$\.byId .*a Map is not JSON/) });
  expect(error('throwString')).toMatchObject({ name: 'NonErrorThrown', message: 'handler threw a non-Error value (string): plain string thrown' });
  expect(error('throwCircular')).toMatchObject({ name: 'NonErrorThrown', message: expect.stringMatching(/^handler threw a non-Error value \(object\): /) });

  // One complete_executions call is one transaction: the attempt records it writes share their
  // inserting transaction (xmin), an acta.executions row's and a success's acta.succeeded_jobs row
  // alike. (Not finished_at: a moved success's is its own clock read, after its row lock.)
  // Some batch held clean and poisoned completions side by side, and it landed whole.
  const written = await db.query<{ job_id: string; tx: string }>(
    'select job_id::text as job_id, xmin::text as tx from acta.executions union all select id::text, xmin::text from acta.succeeded_jobs',
  );
  expect(written.rows.map((r) => r.job_id).sort()).toEqual(ex.map((e) => e.job_id).sort());
  const batches = new Map<string, Set<string>>();
  for (const e of written.rows) {
    if (!batches.has(e.tx)) batches.set(e.tx, new Set());
    batches.get(e.tx)!.add(kinds[ids.indexOf(e.job_id)] === 'clean' ? 'clean' : 'poisoned');
  }
  expect([...batches.values()].some((kindsIn) => kindsIn.has('clean') && kindsIn.has('poisoned'))).toBe(true);
});

test("a user's code that throws where acta reads it (a backoff function, an error's getter, a revoked Proxy) fails only its job; the worker goes on; another realm's Error is an Error; a long message is cut", async () => {
  const logLines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logLines.push(line) }); // a real logger: it reads the error's fields
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  const definitions = [
    defineJob({ name: 'badBackoff', maxAttempts: 2, backoff: (n: number) => [{ ms: 5 }][n]!.ms, handler: () => { throw new Error('first'); } }),
    defineJob({
      name: 'getter',
      maxAttempts: 2,
      backoff: { delayMs: 5 },
      handler: () => {
        const err = new Error('request failed');
        Object.defineProperty(err, 'response', { enumerable: true, get: () => { throw new Error('body already consumed'); } });
        throw err;
      },
    }),
    defineJob({ name: 'revokedProxy', handler: () => { throw revoked.proxy; } }),
    // An Error of another realm is not `instanceof Error` here: it was stored as a thrown non-Error, not retried.
    defineJob({ name: 'otherRealm', maxAttempts: 2, backoff: { delayMs: 5 }, handler: () => { vm.runInNewContext('null.x'); } }),
    // Its text is cut at 64 Ki characters: at ~280 million, serialising the error threw and ended the worker.
    defineJob({ name: 'hugeMessage', maxAttempts: 1, handler: () => { throw new Error('M'.repeat(1_000_000)); } }),
    // An Error in a Proxy whose getPrototypeOf trap answers once, then throws: an instanceof test
    // after the first ended the attempt's code with the trap's error.
    defineJob({
      name: 'trickyProxy',
      maxAttempts: 1,
      handler: () => {
        let reads = 0;
        throw new Proxy(new Error('tricky'), {
          getPrototypeOf(target) {
            if (++reads > 1) throw new Error('trap: no more');
            return Object.getPrototypeOf(target);
          },
        });
      },
    }),
    defineJob({ name: 'ok', handler: () => 'fine' }),
  ];
  const worker = createWorker({ db, definitions, logger, executors: 1 });
  let fatal: unknown;
  worker.done.catch((err) => (fatal = err));
  await worker.start();
  const client = createClient({ force: true, db });
  for (const d of ['badBackoff', 'getter', 'revokedProxy', 'otherRealm', 'hugeMessage', 'trickyProxy', 'ok']) await client.enqueue(d, {});
  try {
    await waitFor(async () => (await rows()).every((r) => r.status === 'failed' || r.status === 'succeeded'), 'every job to end', 15_000);
  } finally {
    await worker.stop();
  }
  expect(fatal).toBeUndefined(); // before: each of the first three ended the worker, and the job was handed back to crash the next
  const [badBackoff, getter, revokedProxy, otherRealm, hugeMessage, trickyProxy, ok] = await rows();
  expect(badBackoff).toMatchObject({ status: 'failed', attempts: 2, error: { message: 'first' } }); // retried after the default backoff
  expect(getter).toMatchObject({ status: 'failed', attempts: 2, error: { name: 'Error', message: 'request failed' } });
  expect(revokedProxy).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'NonErrorThrown' } });
  expect(otherRealm).toMatchObject({ status: 'failed', attempts: 2, error: { name: 'TypeError', message: expect.stringMatching(/null/) } });
  expect(hugeMessage).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'Error', message: `${'M'.repeat(65_536)}… [934464 more characters not stored]` } });
  expect(trickyProxy).toMatchObject({ status: 'failed', attempts: 1, error: { name: expect.any(String) } });
  expect(ok).toMatchObject({ status: 'succeeded', result: 'fine' });
  expect(logLines.some((l) => l.includes('backoff function threw'))).toBe(true);
});

test("an error's cause chain and an AggregateError's errors are stored, bounded: 4 levels, 10 errors, 4,096 characters each, a marker where cut; a cause that throws when read is left out", async () => {
  const fail = (name: string, make: () => unknown) => defineJob({ name, maxAttempts: 1, handler: () => { throw make(); } });
  const definitions = [
    fail('withCause', () => new Error('outer', { cause: Object.assign(new Error('inner', { cause: 'a string cause' }), { code: 'ECONNRESET' }) })),
    fail('causeCycle', () => {
      const a = new Error('a');
      const b = new RangeError('b', { cause: a });
      a.cause = b;
      return a;
    }),
    fail('aggregate', () => new AggregateError([...Array.from({ length: 11 }, (_, i) => new Error(`e${i}`, { cause: new Error(`c${i}`) })), 'not an error'], 'many')),
    fail('throwingCause', () => Object.defineProperty(new Error('plain'), 'cause', { get: () => { throw new Error('no'); } })),
    fail('hugeCause', () => new Error('outer', { cause: new Error('C'.repeat(10_000)) })),
    // An `errors` array whose own slice answers 5,000 errors: they were stored (20 MB; a Proxy's
    // 100,000 took 7.4 s and 403 MB). A million errors: pino wrote them all in one 314 MB log line.
    fail('ownSlice', () => {
      const errors = [new Error('one')];
      errors.slice = () => Array.from({ length: 5_000 }, (_, i) => new Error(`e${i}`));
      const agg = new AggregateError([], 'own slice');
      agg.errors = errors;
      return agg;
    }),
    fail('manyErrors', () => new AggregateError(Array.from({ length: 200_000 }, (_, i) => new Error(`e${i}`)), '200,000 errors')),
    // A plain-object cause of 100,000 rows, a 20 MB Buffer: described by a walk that stops at 1,000
    // characters, not serialised whole first, which took 1.4 s for the Buffer and 47 s for ten of
    // them (docs/decisions/2026-12-02-bounded-error-descriptions.md).
    fail('largeObjectCause', () => new Error('outer', { cause: { status: 500, rows: Array.from({ length: 100_000 }, (_, i) => ({ i })) } })),
    fail('bufferCause', () => new AggregateError(Array.from({ length: 10 }, () => Buffer.alloc(20_000_000)), 'upload failed', { cause: new Uint8Array(5_000_000) })),
    // The log keeps an error's own simple fields (a pg error's detail, an HTTP status), as pino did.
    fail('fields', () => Object.assign(new Error('duplicate key'), { code: '23505', detail: 'Key (email)=(a@b.c) already exists.', status: 409, retryable: false, body: { big: 'x'.repeat(100) } })),
  ];
  const logLines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logLines.push(line) }); // pino's own error serialiser
  const worker = createWorker({ db, definitions, logger, executors: 2 });
  let fatal: unknown;
  worker.done.catch((err) => (fatal = err));
  await worker.start();
  const client = createClient({ force: true, db });
  const ids = [];
  for (const d of definitions) ids.push((await client.enqueue(d.name, {})).id);
  try {
    await waitFor(async () => (await rows()).every((r) => r.status === 'failed'), 'every job to fail', 15_000);
  } finally {
    await worker.stop();
  }
  expect(fatal).toBeUndefined();
  const [withCause, causeCycle, aggregate, throwingCause, hugeCause, ownSlice, manyErrors, largeObjectCause, bufferCause, fields] = await Promise.all(ids.map(async (id) => (await client.getJob(id))!.error as Record<string, any>));
  expect(withCause).toMatchObject({ name: 'Error', message: 'outer', cause: { name: 'Error', message: 'inner', code: 'ECONNRESET', cause: { name: 'NonErrorCause', message: 'a string cause' } } });
  expect(withCause.cause).not.toHaveProperty('stack'); // only the outer error's stack is stored
  // a → b → a → b, then the chain is cut.
  expect(causeCycle.cause).toMatchObject({ name: 'RangeError', message: 'b', cause: { message: 'a', cause: { message: 'b', cause: { message: 'a' } } } });
  expect(causeCycle.cause.cause.cause.cause.cause).toEqual({ name: 'Omitted', message: 'further causes not stored' });
  expect(aggregate).toMatchObject({ name: 'AggregateError', message: 'many' });
  expect(aggregate.errors).toHaveLength(11);
  expect(aggregate.errors[3]).toEqual({ name: 'Error', message: 'e3', cause: { name: 'Error', message: 'c3' } });
  expect(aggregate.errors[10]).toEqual({ name: 'Omitted', message: '2 more errors not stored' });
  expect(throwingCause).toMatchObject({ name: 'Error', message: 'plain' });
  expect(throwingCause).not.toHaveProperty('cause');
  expect(hugeCause.cause.message).toBe(`${'C'.repeat(4_096)}… [5904 more characters not stored]`);
  expect(ownSlice.errors).toEqual([{ name: 'Error', message: 'one' }]);
  expect(manyErrors.errors.map((e: { message: string }) => e.message)).toEqual([...Array.from({ length: 10 }, (_, i) => `e${i}`), '199990 more errors not stored']);
  expect(largeObjectCause.cause.name).toBe('NonErrorCause');
  expect(largeObjectCause.cause.message).toMatch(/^\{"status":500,"rows":\[\{"i":0\},\{"i":1\},.*…$/);
  expect(largeObjectCause.cause.message.length).toBeLessThanOrEqual(1_001);
  expect(bufferCause.cause).toEqual({ name: 'NonErrorCause', message: '<Uint8Array of 5000000 bytes>' });
  expect(bufferCause.errors[0]).toEqual({ name: 'NonErrorCause', message: '<Buffer of 20000000 bytes>' });
  expect(fields).toEqual(expect.objectContaining({ name: 'Error', message: 'duplicate key', code: '23505' }));
  expect(fields).not.toHaveProperty('detail'); // stored as documented
  // The worker logs each failed attempt's error as stored: bounded too (each was its job's last attempt).
  const failures = logLines.filter((l) => l.includes('"job failed: no attempts left"'));
  expect(failures).toHaveLength(definitions.length);
  expect(Math.max(...failures.map((l) => l.length))).toBeLessThan(100_000);
  const logged = JSON.parse(failures.find((l) => l.includes('"200,000 errors"'))!);
  expect(logged.error).toEqual(manyErrors); // the error as stored
  expect(JSON.parse(failures.find((l) => l.includes('duplicate key'))!).error).toEqual({ ...fields, detail: 'Key (email)=(a@b.c) already exists.', status: 409, retryable: false });
  expect(JSON.parse(failures.find((l) => l.includes('"outer"') && l.includes('inner'))!).error).toEqual(withCause);
});

test('a failed attempt with attempts left is logged at warn, "attempt failed"; the last at error, "job failed: no attempts left"; the job\'s own maxAttempts decides, over its definition\'s', async () => {
  const logLines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logLines.push(line) });
  const flaky = defineJob({ name: 'flaky', maxAttempts: 3, backoff: { delayMs: 5 }, handler: () => { throw new Error('still down'); } });
  const client = createClient({ force: true, db });
  const byDefinition = (await client.enqueue(flaky, {})).id; // the definition's 3
  const ownFewer = (await client.enqueue(flaky, {}, { maxAttempts: 1 })).id;
  const ownMore = (await client.enqueue(flaky, {}, { maxAttempts: 4 })).id;
  const worker = createWorker({ db, definitions: [flaky], logger, executors: 2 });
  await worker.start();
  try {
    await waitFor(async () => (await rows()).every((r) => r.status === 'failed'), 'every job to fail', 15_000);
  } finally {
    await worker.stop();
  }
  expect((await rows()).map((r) => [r.id, r.attempts])).toEqual([[byDefinition, 3], [ownFewer, 1], [ownMore, 4]]);
  const logged = logLines.map((l) => JSON.parse(l) as { level: number; msg: string; jobId?: string; attempt?: number; maxAttempts?: number; retryDelayMs?: number; error?: { message?: string } });
  const of = (id: string) => logged.filter((l) => l.jobId === id && l.error).map((l) => [l.level, l.msg, l.attempt, l.maxAttempts, l.retryDelayMs, l.error!.message]);
  // A retry says when it runs: the backoff, 5 ms · 2^(attempt − 1) (docs/operating.md, "Logs").
  const retried = (attempt: number, max: number) => [40, 'attempt failed', attempt, max, 5 * 2 ** (attempt - 1), 'still down'];
  const final = (attempt: number) => [50, 'job failed: no attempts left', attempt, attempt, undefined, 'still down'];
  expect(of(byDefinition)).toEqual([retried(1, 3), retried(2, 3), final(3)]);
  expect(of(ownFewer)).toEqual([final(1)]);
  expect(of(ownMore)).toEqual([retried(1, 4), retried(2, 4), retried(3, 4), final(4)]);
});

test("the finalizer's 4 MiB bound counts UTF-8 bytes: three results of 3.6 MB of CJK text go in three calls", async () => {
  let started = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const cjk = defineJob({
    name: 'cjk',
    handler: async () => {
      started++;
      await gate;
      return '日'.repeat(1_200_000); // 1.2 million UTF-16 units, 3.6 MB in UTF-8
    },
  });
  const sizes: number[] = [];
  const watched = aroundStatements(db, async (text, params, run) => {
    if (text.includes('acta.complete_executions')) sizes.push(Buffer.byteLength(JSON.stringify(params), 'utf8'));
    return run();
  });
  await createClient({ force: true, db }).enqueueMany([1, 2, 3].map(() => ({ definition: 'cjk', payload: {} })));
  const worker = createWorker({ db: watched, definitions: [cjk], logger: silentLogger, executors: 3 });
  await worker.start();
  try {
    await waitFor(() => started === 3, 'every handler to start');
    // All return in the same tick. Counted in UTF-16 units (1.2 Mi each) the first went alone and
    // the other two shared a call, as the first's was in flight (or all three shared one).
    open();
    await waitFor(async () => (await rows()).every((r) => r.status === 'succeeded'), 'every job to succeed');
  } finally {
    await worker.stop();
  }
  expect(sizes.length).toBe(3);
  expect(sizes.every((bytes) => bytes > 3_600_000 && bytes < 4 * 1024 * 1024)).toBe(true);
  expect((await rows()).map((r) => (r.result as string).length)).toEqual([1_200_000, 1_200_000, 1_200_000]);
});

/** A Db whose complete_executions calls fail as `fail(n)` says for the n-th call (1-based). */
function flakyCompletions(inner: Db, fail: (n: number) => 'before' | 'after' | null): Db & { calls: number } {
  const transient = (message: string) => Object.assign(new Error(message), { code: '57P01' });
  const wrapped: Db & { calls: number } = Object.assign(
    aroundStatements(inner, async (text, _params, run) => {
      if (!text.includes('acta.complete_executions')) return run();
      wrapped.calls++;
      const mode = fail(wrapped.calls);
      if (mode === 'before') throw transient('terminating connection due to administrator command');
      const result = await run();
      if (mode === 'after') throw new Error('Connection terminated unexpectedly'); // committed; the answer is lost
      return result;
    }),
    { calls: 0 },
  );
  return wrapped;
}

test('a completion write that fails transiently is repeated while the worker holds the job, which does not run again', async () => {
  let runs = 0;
  const once = defineJob({
    name: 'once',
    handler: async () => {
      runs++;
      return { done: true };
    },
  });
  // Three failed tries (1 s, 2 s, 4 s apart: longer than the 4 s lease, so the heartbeat must keep
  // renewing the Finalizing row), then the write lands.
  const flaky = flakyCompletions(db, (n) => (n <= 3 ? 'before' : null));
  const { id } = await createClient({ force: true, db }).enqueue('once', {}, { maxAttempts: 3 });
  const worker = createWorker({ db: flaky, definitions: [once], logger: silentLogger, executors: 2, heartbeatIntervalMs: 1000 });
  await worker.start();
  try {
    await waitFor(async () => (await rows())[0]?.status === 'succeeded', 'the job to succeed', 30_000);
  } finally {
    await worker.stop();
  }
  expect(flaky.calls).toBe(4);
  expect(runs).toBe(1);
  expect((await rows())[0]).toMatchObject({ id, status: 'succeeded', attempts: 1, execution: 1, result: { done: true } });
  expect(await ledger()).toMatchObject([{ job_id: id, execution: 1, outcome: 'succeeded', charged: true }]);
});

test('a completion write whose answer was lost is repeated, found already applied, and the job is not run again', async () => {
  let runs = 0;
  const once = defineJob({
    name: 'once',
    handler: async () => {
      runs++;
      return { done: true };
    },
  });
  const flaky = flakyCompletions(db, (n) => (n === 1 ? 'after' : null));
  const { id } = await createClient({ force: true, db }).enqueue('once', {}, { maxAttempts: 3 });
  const worker = createWorker({ db: flaky, definitions: [once], logger: silentLogger, executors: 2, heartbeatIntervalMs: 1000 });
  await worker.start();
  try {
    await waitFor(() => flaky.calls >= 2, 'the write to be repeated', 10_000);
  } finally {
    await worker.stop();
  }
  expect(runs).toBe(1);
  expect((await rows())[0]).toMatchObject({ id, status: 'succeeded', attempts: 1, execution: 1 });
  expect(await ledger()).toMatchObject([{ job_id: id, execution: 1, outcome: 'succeeded' }]);
});
