// client.result of a job that is gone (docs/retention.md, "Retention zero"): a job is watched from
// the moment result first reaches the database, and a completion under retention zero deletes a
// success it finds unwatched. Each window is opened on purpose by holding one statement of the
// client's Db until the job is where the case needs it.
import { randomUUID } from 'node:crypto';
import { createClient, createWorker, defineJob, JobDeletedError, JobNotFoundError } from '../../src';
import type { Db } from '../../src/db/Db';
import { sqlLedger } from '../../src/ledger';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();
let ns: string;
beforeEach(() => {
  ns = `follow-deleted-${randomUUID().slice(0, 8)}`;
});

/** A gate: `wait` resolves once `open` was called. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** `db` with each statement that contains `marker` held until `held` resolves; `calls` counts them. */
function holding(marker: string, held: Promise<void>): { db: Db; calls: () => number } {
  let n = 0;
  const query: Db['query'] = async (text, params, options) => {
    if (text.includes(marker)) {
      n++;
      await held;
    }
    return db.query(text, params, options);
  };
  return { db: { ...db, query }, calls: () => n };
}

const rowsOf = async (id: string) =>
  (await db.query<{ status: string; watched: boolean }>('select status, watched from acta.all_jobs where id = $1', [id])).rows;

/** A worker of the namespace under retention zero; its handler returns 'done' once `before` resolves. */
function zeroWorker(before: Promise<void> = Promise.resolve()) {
  const ran: string[] = [];
  const worker = createWorker({
    db, namespace: ns, logger: silentLogger, listen: false, safetyPollMs: 50, retention: { succeededMs: 0 },
    definitions: [defineJob({ name: 'work', maxAttempts: 1, handler: async (_: unknown, ctx) => (ran.push(String(ctx.jobId)), await before, 'done') })],
  });
  return { worker, ran };
}

test('retention zero: a result whose watch reaches the database after the job succeeded and was deleted rejects with JobDeletedError (retentionZero), a JobNotFoundError', async () => {
  const { worker, ran } = zeroWorker();
  await worker.start();
  try {
    const held = gate();
    const slow = holding('acta.watch_job', held.wait);
    const client = createClient({ db: slow.db, namespace: ns });
    const { id } = await client.enqueue('work', {});
    const outcome = client.result(id, { timeoutMs: 20_000 }).then(
      () => 'delivered',
      (err: unknown) => err,
    );
    await waitFor(async () => slow.calls() === 1 && ran.length === 1 && (await rowsOf(id)).length === 0, 'the job to succeed and go while the watch is held');
    held.open();
    const err = await outcome;
    expect(err).toBeInstanceOf(JobDeletedError);
    expect(err).toBeInstanceOf(JobNotFoundError);
    expect(err).toMatchObject({ code: 'ACTA_JOB_DELETED', reason: 'retentionZero', jobId: String(id) });
    expect((err as Error).message).toMatch(/retention zero/);
  } finally {
    await worker.stop();
  }
});

test('retention zero: a result whose watch is in place before the completion delivers, though LISTEN comes into effect only after the NOTIFY', async () => {
  const running = gate();
  const { worker } = zeroWorker(running.wait);
  await worker.start();
  try {
    const listening = gate();
    const client = createClient({ db: { ...db, listen: async (...args) => (await listening.wait, db.listen(...args)) }, namespace: ns });
    const { id } = await client.enqueue('work', {});
    const result = client.result(id, { timeoutMs: 20_000 });
    await waitFor(async () => (await rowsOf(id))[0]?.watched, 'the watch');
    running.open();
    await waitFor(async () => (await rowsOf(id))[0]?.status === 'succeeded', 'the job to succeed');
    listening.open();
    expect(await result).toBe('done');
  } finally {
    await worker.stop();
  }
});

test('a job deleted while it is followed rejects with JobDeletedError (whileFollowed); an id never issued is a plain JobNotFoundError', async () => {
  const ledger = sqlLedger(db);
  const [{ id }] = await ledger.enqueueJobs(ns, {
    definitions: ['d'], payloads: ['{}'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null], concurrencyKeys: [null], rateKeys: [null], lanes: [null],
  });
  const client = createClient({ db, namespace: ns });
  const outcome = client.result(id!, { pollMs: 20 }).then(
    () => 'delivered',
    (err: unknown) => err,
  );
  await waitFor(async () => (await rowsOf(id!))[0]?.watched, 'the watch');
  await db.query('select acta.delete_jobs(array[$1::bigint])', [id]);
  const err = await outcome;
  expect(err).toBeInstanceOf(JobDeletedError);
  expect(err).toMatchObject({ code: 'ACTA_JOB_DELETED', reason: 'whileFollowed', jobId: String(id) });

  const never = await client.result('9000000000000').catch((e: unknown) => e);
  expect(never).not.toBeInstanceOf(JobDeletedError);
  expect(never).toMatchObject({ code: 'ACTA_JOB_NOT_FOUND' });
});
