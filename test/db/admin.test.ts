// The admin operations of src/client/admin.ts on a real database: listings by keyset along indexes,
// retry, cancel and delete (one id, or a filter in bounded batches), workers and namespaces.
import { randomUUID } from 'node:crypto';
import { createClient, type Client } from '../../src';
import { ADMIN_BATCH } from '../../src/client/bulkOperations';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs } from '../../src/db/jobs';
import { registerWorker, stopWorker } from '../../src/db/workers';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase({ timeoutMs: 60_000 });
let client: Client;
beforeEach(async () => {
  await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.workers, acta.pauses, acta.steps');
  client = createClient({ force: true, db });
});

/** A worker of 'default' running `definitions`; its id. */
async function worker(definitions: string[], build: string | null = null): Promise<string> {
  const workerId = randomUUID();
  await registerWorker(db, { workerId, namespace: 'default', hostname: 'admin-test', pid: 7, definitions, maxAttempts: definitions.map(() => null), leaseMs: 60_000, build, policies: {} });
  return workerId;
}
/** Claims every due job of `definition` and ends each with `outcome`; their ids. */
async function runAll(definition: string, outcome: 'succeeded' | 'failed_final'): Promise<string[]> {
  const w = await worker([definition]);
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: w, definitions: [definition], limit: 1_000, leaseMs: 60_000 });
  await completeExecutions(
    db,
    w,
    rows.map((r) => ({ id: r.id, execution: r.execution, outcome, result: outcome === 'succeeded' ? '1' : null, error: outcome === 'succeeded' ? null : JSON.stringify({ name: 'Error', message: `boom ${r.id}` }), retryDelayMs: 0 })),
  );
  return rows.map((r) => r.id);
}
const enqueue = async (definition: string, n: number, more: { lane?: string; concurrencyKey?: string } = {}) =>
  (await client.enqueueMany(Array.from({ length: n }, (_, i) => ({ definition, payload: { i }, ...more })))).map((r) => r.id);

test('listJobs pages newest first by keyset, filtered by status, definition, key, lane and time ranges', async () => {
  const failed = (await enqueue('f', 3), await runAll('f', 'failed_final'));
  const done = (await enqueue('s', 2), await runAll('s', 'succeeded'));
  const ready = await enqueue('r', 5);
  const laned = await enqueue('r', 2, { lane: 'L' });
  const all = [...failed, ...done, ...ready, ...laned].sort((a, b) => Number(b) - Number(a));
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const page: Awaited<ReturnType<Client['listJobs']>> = await client.listJobs({ limit: 3, cursor });
    seen.push(...page.jobs.map((j) => j.id));
    cursor = page.nextCursor;
    if (cursor === null) break;
  }
  expect(seen).toEqual(all);
  const f = await client.listJobs({ status: 'failed' });
  expect(f.jobs.map((j) => j.id)).toEqual([...failed].reverse());
  expect(f.jobs[0]).toMatchObject({ status: 'failed', definition: 'f', attempts: 1, errorMessage: `boom ${failed[2]}` });
  expect(f.nextCursor).toBeNull();
  expect((await client.listJobs({ status: ['succeeded', 'failed'] })).jobs).toHaveLength(5);
  expect((await client.listJobs({ definition: 'r' })).jobs.map((j) => j.id)).toEqual([...ready, ...laned].reverse());
  expect((await client.listJobs({ lane: 'L' })).jobs.map((j) => j.id)).toEqual([...laned].reverse());
  expect((await client.listJobs({ finishedAfter: new Date(0) })).jobs).toHaveLength(5);
  expect((await client.listJobs({ createdBefore: new Date(0) })).jobs).toEqual([]);
  expect((await client.listJobs({ namespace: 'elsewhere' })).jobs).toEqual([]);
  await expect(client.listJobs({ status: 'done' as never })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.listJobs({ limit: 0 })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.listJobs({ cursor: 'x' })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.listJobs({ createdAfter: 'yesterday' as never })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
});

test('retryJobs: a Failed job is Ready and due now with a fresh attempt budget, its attempts kept in the ledger; a filter retries every Failed one in batches', async () => {
  await enqueue('f', ADMIN_BATCH + 7);
  const failed = await runAll('f', 'failed_final');
  const [one] = await client.retryJobs({ ids: [failed[0]] });
  expect(one).toBe(failed[0]);
  const job = await client.getJob(failed[0]);
  expect(job).toMatchObject({ status: 'ready', attempts: 0, execution: 1, finishedAt: null, result: null });
  expect(job?.error).toMatchObject({ message: `boom ${failed[0]}` }); // kept until the next attempt ends
  expect(job?.executions.map((e) => e.outcome)).toEqual(['failed_final']);
  // Not Failed any more: a second retry of it does nothing; a Ready job is not retried.
  expect(await client.retryJobs({ ids: [failed[0]] })).toEqual([]);
  const rest = await client.retryJobs({ definition: 'f' });
  expect(rest.sort()).toEqual(failed.slice(1).sort());
  expect((await client.listJobs({ status: 'failed' })).jobs).toEqual([]);
  // The retried jobs are claimed again, as attempt 2 of their fence.
  const w = await worker(['f']);
  const again = await claimJobs(db, { namespace: 'default', workerId: w, definitions: ['f'], limit: 10, leaseMs: 60_000 });
  expect(again.rows.map((r) => [r.execution, r.attempts])).toEqual(again.rows.map(() => [2, 0]));
  await expect(client.retryJobs({ status: 'ready' })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
}, 30_000);

test('cancelJobs cancels Ready and Waiting jobs at once and asks the worker of an Executing one; deleteJobs removes finished jobs only', async () => {
  const [a, b] = await enqueue('c', 2);
  const w = await worker(['x', 'p']);
  const [running] = await enqueue('x', 1);
  await claimJobs(db, { namespace: 'default', workerId: w, definitions: ['x'], limit: 1, leaseMs: 60_000 });
  // Two jobs parked on a signal (Waiting), as a handler's ctx.waitForSignal leaves them.
  const parked = await enqueue('p', 2);
  const claimed = await claimJobs(db, { namespace: 'default', workerId: w, definitions: ['p'], limit: 2, leaseMs: 60_000 });
  const wait = JSON.stringify({ names: ['go'], step: 'acta:signal:0' });
  await completeExecutions(db, w, claimed.rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'signal_wait' as const, result: wait, error: null, retryDelayMs: 0 })));
  expect((await client.getJob(parked[0]))?.status).toBe('waiting');
  // A selection that narrows nothing is every job of the namespace: refused unless it says all
  // (cancelJobs({}) cancelled every Ready job), before any statement; the CLI refuses it likewise.
  const statuses = async () => (await client.listJobs()).jobs.map((j) => j.status).join();
  const before = await statuses();
  for (const empty of [{}, { namespace: 'default' }, { definition: undefined }, { all: false }]) {
    await expect(client.cancelJobs(empty)).rejects.toThrow(/^cancelJobs: this selection names no ids and no filter, so it is every job of namespace "default": give \{ ids \}, a filter .*, or \{ all: true \} to mean every job$/);
    await expect(client.deleteJobs(empty)).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringMatching(/^deleteJobs: /) });
    await expect(client.retryJobs(empty)).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringMatching(/^retryJobs: /) });
  }
  await expect(client.cancelJobs({ all: 'yes' } as never)).rejects.toThrow(/^cancelJobs: all must be a boolean/);
  expect(await statuses()).toBe(before);
  expect(await client.cancelJobs({ ids: [a, parked[0]] })).toEqual({ cancelled: [parked[0], a], requested: [] });
  expect(await client.cancelJobs({ status: ['ready', 'waiting', 'executing'] })).toEqual({ cancelled: [parked[1], b], requested: [running] });
  expect((await client.getJob(running))?.cancelRequestedAt).not.toBeNull();
  // Delete: the Cancelled ones go; the Executing one stays.
  const deleted = await client.deleteJobs({ all: true });
  expect(deleted.sort()).toEqual([a, b, ...parked].sort());
  expect(await client.getJob(a)).toBeNull();
  expect((await client.getJob(running))?.status).toBe('executing');
  expect(await client.deleteJobs({ ids: [running] })).toEqual([]);
  await expect(client.deleteJobs({ status: 'executing' })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
});

test('deleteJobs deletes a finished job with all that refers to it: its attempts, steps and signals (acta.delete_jobs)', async () => {
  await enqueue('gone', 1);
  const [id, kept] = [...(await runAll('gone', 'failed_final')), ...(await enqueue('stays', 1))];
  for (const job of [id, kept]) {
    await db.query(`insert into acta.steps (job_id, name, execution, result) values ($1, 's1', 1, '1')`, [job]);
    await db.query(`insert into acta.signals (job_id, name, payload) values ($1, 'go', '1')`, [job]);
  }
  const count = async (table: string, job: string) => Number((await db.query<{ n: string }>(`select count(*) as n from acta.${table} where job_id = $1`, [job])).rows[0].n);
  expect(await count('executions', id)).toBe(1);
  expect(await client.deleteJobs({ ids: [id, kept] })).toEqual([id]);
  expect([await count('executions', id), await count('steps', id), await count('signals', id)]).toEqual([0, 0, 0]);
  // A Ready job is not deleted, nor what refers to it.
  expect([await count('steps', kept), await count('signals', kept)]).toEqual([1, 1]);
});

test('listWorkers shows each worker with its build, status and the jobs it holds; namespaces counts by status with the oldest due wait and the pauses', async () => {
  const w1 = await worker(['x'], 'v2');
  const w2 = await worker(['y'], 'v1');
  await stopWorker(db, w2);
  const [held] = await enqueue('x', 1);
  await claimJobs(db, { namespace: 'default', workerId: w1, definitions: ['x'], limit: 1, leaseMs: 60_000 });
  await enqueue('x', 2);
  await db.query(`update acta.jobs set run_at = now() - interval '5 seconds' where status = 'ready'`);
  const workers = await client.listWorkers();
  expect(workers.map((w) => [w.id, w.status, w.build, w.definitions, w.holds])).toEqual([
    [w2, 'stopped', 'v1', ['y'], []],
    [w1, 'alive', 'v2', ['x'], [held]],
  ]);
  await client.pause({ definition: 'x', by: 'me' });
  const [ns] = (await client.namespaces()).filter((n) => n.name === 'default');
  expect(ns.counts).toEqual({ ready: 2, executing: 1, waiting: 0, succeeded: 0, failed: 0, cancelled: 0 });
  // x is paused: its due jobs wait for the resume, not for a worker (test/adminTables.test.ts).
  expect(ns.oldestReadyMs).toBeNull();
  expect(ns.oldestPausedMs).toBeGreaterThanOrEqual(4_900);
  expect(ns.pauses).toMatchObject([{ definition: 'x', pausedBy: 'me' }]);
});

test('listWorkers shows a worker listed alive but silent past 7 heartbeats as silent (as acta why judges it), and the CLI table says so', async () => {
  // Lease 60 s: H = 15 s, gone after 7 H = 105 s of silence (WORKER_LIVE_SQL).
  const [quiet, gone, stopped] = [await worker(['x']), await worker(['x']), await worker(['x'])];
  await stopWorker(db, stopped);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '100 seconds' where id = $1`, [quiet]);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '110 seconds' where id = any ($1)`, [[gone, stopped]]);
  // A worker of the previous revision registers without its lease: never silent.
  const old = '00000000-0000-4000-8000-0000000000aa';
  await db.query(`select acta.register_worker($1, 'default', 'old-host', 1, array['x'], array[null::integer], array['recovery'], array[60000], null, null)`, [old]);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 day' where id = $1`, [old]);
  const byId = new Map((await client.listWorkers()).map((w) => [w.id, w]));
  expect([quiet, gone, stopped, old].map((id) => [byId.get(id)?.status, byId.get(id)?.silent])).toEqual([
    ['alive', false],
    ['alive', true],
    ['stopped', false],
    ['alive', false],
  ]);
  expect(byId.get(gone)?.silentMs).toBeGreaterThanOrEqual(110_000);
  // acta workers' table: the STATUS column.
  const { registerAdminCommands } = await import('../../src/ops/cli/admin');
  const { Command } = await import('commander');
  const out: string[] = [];
  const log = jest.spyOn(console, 'log').mockImplementation((line: string) => void out.push(line));
  try {
    const cli = new Command().exitOverride();
    registerAdminCommands(cli, ((_ns: string, fn: (c: Client) => Promise<unknown>) => fn(client)) as never);
    await cli.parseAsync(['node', 'acta', 'workers']);
  } finally {
    log.mockRestore();
  }
  const status = (id: string) => out.join('\n').split('\n').find((l) => l.startsWith(id))?.split(/\s+/)[1];
  expect([quiet, gone, stopped, old].map(status)).toEqual(['alive', 'silent', 'stopped', 'alive']);
});

test('the listings and counts read indexes, not the table, on a table of 200,000 jobs with statistics', async () => {
  await db.query(`insert into acta.jobs (namespace, definition, payload, status, finished_at, lease_holder, lease_expires_at)
                  select 'default', 'd' || (g % 10), '{}', case when g % 1000 = 0 then 'failed' when g % 997 = 0 then 'executing' when g % 10 = 0 then 'ready' else 'succeeded' end,
                         case when g % 10 <> 0 then now() end, case when g % 997 = 0 then gen_random_uuid() end, case when g % 997 = 0 then now() + interval '1 minute' end
                  from generate_series(1, 200000) g`);
  await db.query('vacuum analyze acta.jobs');
  const plan = async (text: string, params: unknown[]) => {
    const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${text}`, params);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  };
  // Capture each statement the operations send, then read its plan with the same parameters.
  const sent: { text: string; params: unknown[] }[] = [];
  const record = (text: string, params?: unknown[]) => {
    if (!/^set local /.test(text)) sent.push({ text, params: params ?? [] });
  };
  // The namespaces summary runs in a transaction of its own (SET LOCAL jit = off): its statement is captured there.
  const watched = createClient({
    db: {
      ...db,
      query: (text: string, params?: unknown[]) => (record(text, params), db.query(text, params)),
      transaction: (fn, options) => db.transaction((tx) => fn({ query: (text: string, params?: unknown[]) => (record(text, params), tx.query(text, params as never)) } as never), options),
    } as typeof db,
  });
  for (const status of ['failed', 'succeeded', 'executing', 'ready'] as const) await watched.listJobs({ status, limit: 20 });
  await watched.listJobs({ limit: 20 });
  await watched.listJobs({ definition: 'd3', status: 'failed', cursor: '150000' });
  await watched.namespaces();
  await watched.listWorkers();
  expect(sent.length).toBe(8);
  for (const s of sent) {
    const p = await plan(s.text, s.params);
    expect({ text: s.text.slice(0, 60), plan: p }).not.toEqual(expect.objectContaining({ plan: expect.stringMatching(/Seq Scan on jobs/) }));
  }
}, 60_000);

test("getJob and listJobs show a job's effective attempt limit and its source: its own, else its definition's (acta.definitions), else 25", async () => {
  // docs/decisions/2026-11-30-max-attempts-own-else-definition.md. Before, a job without its own
  // limit read maxAttempts null: "attempts 3, failed" with no limit an operator could see.
  const workerId = randomUUID();
  await registerWorker(db, { workerId, namespace: 'default', hostname: 'admin-test', pid: 7, definitions: ['limited', 'unlimited'], maxAttempts: [3, null], leaseMs: 60_000, build: null, policies: {} });
  const [inherits, own] = (await client.enqueueMany([{ definition: 'limited', payload: 1 }, { definition: 'limited', payload: 2, maxAttempts: 5 }])).map((r) => r.id);
  const [unlimited] = await enqueue('unlimited', 1);
  const [undeclared] = await enqueue('nobody-declares-this', 1);
  // The job without a limit of its own fails its last attempt: the operator's case.
  const { rows } = await claimJobs(db, { namespace: 'default', workerId, definitions: ['limited'], limit: 1, leaseMs: 60_000 });
  expect(rows.map((r) => r.id)).toEqual([inherits]);
  await completeExecutions(db, workerId, [{ id: inherits, execution: rows[0].execution, outcome: 'failed_final', result: null, error: JSON.stringify({ name: 'Error', message: 'boom' }), retryDelayMs: 0 }]);

  const expected = {
    [inherits]: { status: 'failed', attempts: 1, maxAttempts: null, effectiveMaxAttempts: 3, maxAttemptsFrom: 'definition' },
    [own]: { maxAttempts: 5, effectiveMaxAttempts: 5, maxAttemptsFrom: 'job' },
    [unlimited]: { maxAttempts: null, effectiveMaxAttempts: 25, maxAttemptsFrom: 'default' },
    [undeclared]: { maxAttempts: null, effectiveMaxAttempts: 25, maxAttemptsFrom: 'default' },
  };
  for (const [id, fields] of Object.entries(expected)) expect(await client.getJob(id)).toMatchObject(fields);
  const listed = (await client.listJobs()).jobs;
  for (const [id, fields] of Object.entries(expected)) expect(listed.find((j) => j.id === id)).toMatchObject(fields);
});
