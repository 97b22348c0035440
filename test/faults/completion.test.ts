/**
 * Completion writes under faults (issue 4), with an in-process worker on a real PostgreSQL:
 * - outcomes that cannot be stored (NUL or a lone surrogate in jsonb, a circular or BigInt value,
 *   a thrown non-Error) never block their batch: the clean completions of the same batch land,
 *   and each poisoned job ends Failed without new attempts, with a readable error;
 * - a completion write that fails transiently is repeated while the worker holds the job (its
 *   heartbeat renewing the lease meanwhile), and the job is not run again — also when the write
 *   committed and only its answer was lost.
 */
import pino from 'pino';
import { createClient, createWorker, type Db, defineJob } from '../../src';
import { aroundStatements } from '../helpers/around';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.executions, acta.workers'));

interface Row {
  id: string;
  status: string;
  attempts: number;
  execution: number;
  result: unknown;
  error: { name?: string; message?: string } | null;
}
const rows = async () => (await db.query<Row>('select id, status, attempts, execution, result, error from acta.jobs order by id')).rows;
const ledger = async () =>
  (await db.query<{ job_id: string; execution: number; outcome: string; charged: boolean; finished_at: Date }>(
    'select job_id, execution, outcome, charged, finished_at from acta.executions order by job_id, execution',
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
  const kinds = ['clean', 'nul', 'clean', 'surrogate', 'circular', 'clean', 'bigint', 'throwString', 'throwCircular', 'clean'];
  const client = createClient({ db });
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
  expect(error('throwString')).toMatchObject({ name: 'NonErrorThrown', message: 'handler threw a non-Error value (string): plain string thrown' });
  expect(error('throwCircular')).toMatchObject({ name: 'NonErrorThrown', message: expect.stringMatching(/^handler threw a non-Error value \(object\): /) });

  // One complete_executions call is one transaction: rows written together share finished_at.
  // Some batch held clean and poisoned completions side by side, and it landed whole.
  const batches = new Map<number, Set<string>>();
  for (const e of ex) {
    const key = e.finished_at.getTime();
    if (!batches.has(key)) batches.set(key, new Set());
    batches.get(key)!.add(kinds[ids.indexOf(e.job_id)] === 'clean' ? 'clean' : 'poisoned');
  }
  expect([...batches.values()].some((kindsIn) => kindsIn.has('clean') && kindsIn.has('poisoned'))).toBe(true);
});

test("a user's code that throws where acta reads it (a backoff function, an error's getter, a revoked Proxy) fails only its job; the worker goes on", async () => {
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
    defineJob({ name: 'ok', handler: () => 'fine' }),
  ];
  const worker = createWorker({ db, definitions, logger, executors: 1 });
  let fatal: unknown;
  worker.done.catch((err) => (fatal = err));
  await worker.start();
  const client = createClient({ db });
  for (const d of ['badBackoff', 'getter', 'revokedProxy', 'ok']) await client.enqueue(d, {});
  try {
    await waitFor(async () => (await rows()).every((r) => r.status === 'failed' || r.status === 'succeeded'), 'every job to end', 15_000);
  } finally {
    await worker.stop();
  }
  expect(fatal).toBeUndefined(); // before: each of the first three ended the worker, and the job was handed back to crash the next
  const [badBackoff, getter, revokedProxy, ok] = await rows();
  expect(badBackoff).toMatchObject({ status: 'failed', attempts: 2, error: { message: 'first' } }); // retried after the default backoff
  expect(getter).toMatchObject({ status: 'failed', attempts: 2, error: { name: 'Error', message: 'request failed' } });
  expect(revokedProxy).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'NonErrorThrown' } });
  expect(ok).toMatchObject({ status: 'succeeded', result: 'fine' });
  expect(logLines.some((l) => l.includes('backoff function threw'))).toBe(true);
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
  const { id } = await createClient({ db }).enqueue('once', {}, { maxAttempts: 3 });
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
  const { id } = await createClient({ db }).enqueue('once', {}, { maxAttempts: 3 });
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
