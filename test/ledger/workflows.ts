// The contract's workflow cases (contract.ts runs them on both ledgers): the signal wait and the
// children wait of acta.complete_executions, acta.send_signal, acta.spawn_children,
// acta.tell_parents, the timeout of acta.release_waits (by a heartbeat), and cancels.
import { randomUUID } from 'node:crypto';
import { defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import type { EnqueueRows } from '../../src/db/jobs';
import type { ClaimedRow, CompletionRow } from '../../src/db/types';
import type { LedgerUnderTest } from './contract';

const LEASE_MS = 60_000;
const ns = () => `wf-${randomUUID().slice(0, 8)}`;
/** Enqueue rows of `definitions` with every option unset (the contract's workflow and retention-zero cases). */
export const rows = (definitions: string[], more: Partial<EnqueueRows> = {}): EnqueueRows => ({
  definitions,
  payloads: definitions.map((_, i) => JSON.stringify({ i })),
  priorities: definitions.map(() => null),
  runAts: definitions.map(() => null),
  maxAttempts: definitions.map(() => null),
  idempotencyKeys: definitions.map(() => null),
  ...more,
});
const signalWait = (r: ClaimedRow, names: string[], step = 'acta:signal:0', timeoutMs: number | null = null): CompletionRow => ({
  id: r.id,
  execution: r.execution,
  outcome: 'signal_wait',
  result: JSON.stringify({ names, step, timeoutMs }),
  error: null,
  retryDelayMs: 0,
});
const childrenWait = (r: ClaimedRow, step = 'acta:children:0'): CompletionRow => ({ id: r.id, execution: r.execution, outcome: 'children_wait', result: JSON.stringify({ step, timeoutMs: null }), error: null, retryDelayMs: 0 });
const ended = (r: ClaimedRow, outcome: CompletionRow['outcome']): CompletionRow => ({
  id: r.id,
  execution: r.execution,
  outcome,
  result: outcome === 'succeeded' ? JSON.stringify({ ok: r.id }) : null,
  error: outcome.startsWith('failed') ? JSON.stringify({ name: 'Error', message: 'x' }) : null,
  retryDelayMs: 0,
});

export function workflowCases(get: () => LedgerUnderTest): void {
  const setup = async (definitions: string[]) => {
    const { ledger } = get();
    const namespace = ns();
    const workerId = randomUUID();
    const defs = definitions.map((name) => defineJob({ name, handler: () => undefined }));
    await ledger.registerWorker({
      workerId,
      namespace,
      hostname: 'contract',
      pid: 1,
      definitions,
      maxAttempts: definitions.map(() => null),
      leaseMs: LEASE_MS,
      build: null,
      policies: Object.fromEntries(defs.map((d) => [d.name, declaredPolicy(d)])),
    });
    const claim = async (definition: string, limit = 1) => (await ledger.claimJobs({ namespace, workerId, definitions: [definition], limit, leaseMs: LEASE_MS })).rows;
    const enqueue = async (definition: string, n = 1, more: Partial<EnqueueRows> = {}) => (await ledger.enqueueJobs(namespace, rows(Array(n).fill(definition), more))).map((r) => r.id as string);
    const complete = (completions: CompletionRow[]) => ledger.completeExecutions(workerId, completions);
    const job = async (id: string) => (await ledger.readJob(namespace, id))!;
    const signal = (jobId: string, name: string, payload: unknown, idempotencyKey: string | null = null) =>
      ledger.sendSignal({ namespace, jobId, jobKey: null, name, payloadJson: JSON.stringify(payload), idempotencyKey });
    const spawn = (parent: ClaimedRow, definitions: string[], failParent: boolean[] = definitions.map(() => false), step = 'acta:spawn:0') =>
      ledger.spawnChildren({ workerId, parentId: parent.id, execution: parent.execution, step, rows: rows(definitions), failParent });
    return { ledger, namespace, workerId, claim, enqueue, complete, job, signal, spawn };
  };

  test('signal wait: the job parks Waiting, uncharged and unclaimable; a signal wakes it with its payload in the wait step', async () => {
    const t = await setup(['s']);
    const [id] = await t.enqueue('s');
    const [row] = await t.claim('s');
    expect((await t.complete([signalWait(row, ['go'])])).map((a) => a.status)).toEqual(['waiting']);
    expect(await t.job(id)).toMatchObject({ status: 'waiting', attempts: 0, executions: [{ outcome: 'signal_wait', charged: false }] });
    expect(await t.claim('s')).toEqual([]);
    expect(await t.signal(id, 'other', 1)).toEqual({ jobId: id, outcome: 'queued' });
    expect((await t.job(id)).status).toBe('waiting');
    expect(await t.signal(id, 'go', { n: 1 })).toEqual({ jobId: id, outcome: 'consumed' });
    expect((await t.job(id)).status).toBe('ready');
    const [again] = await t.claim('s');
    expect(again).toMatchObject({ id, execution: 2, attempts: 0 });
    expect(await t.ledger.loadSteps(id)).toEqual(new Map([['acta:signal:0', { name: 'go', payload: { n: 1 } }]]));
  });

  test('signal before wait: kept in the mailbox, consumed by the wait at once (the job goes straight back to Ready), once', async () => {
    const t = await setup(['s']);
    const [id] = await t.enqueue('s');
    const [row] = await t.claim('s');
    expect(await t.signal(id, 'go', 'early', 'k1')).toEqual({ jobId: id, outcome: 'queued' });
    expect(await t.signal(id, 'go', 'early again', 'k1')).toEqual({ jobId: id, outcome: 'duplicate' });
    expect(await t.signal(id, 'go', 'second', null)).toEqual({ jobId: id, outcome: 'queued' });
    await t.complete([signalWait(row, ['stop', 'go'])]);
    expect((await t.job(id)).status).toBe('ready');
    expect(await t.ledger.loadSteps(id)).toEqual(new Map([['acta:signal:0', { name: 'go', payload: 'early' }]]));
    // The second signal waits for the next wait.
    const [row2] = await t.claim('s');
    await t.complete([signalWait(row2, ['go'], 'acta:signal:1')]);
    expect((await t.job(id)).status).toBe('ready');
    expect((await t.ledger.loadSteps(id)).get('acta:signal:1')).toEqual({ name: 'go', payload: 'second' });
    const [row3] = await t.claim('s');
    await t.complete([signalWait(row3, ['go'], 'acta:signal:2')]);
    expect((await t.job(id)).status).toBe('waiting');
  });

  test('a signal to an ended job or an unknown one is answered, not kept', async () => {
    const t = await setup(['s']);
    const [id] = await t.enqueue('s');
    const [row] = await t.claim('s');
    await t.complete([ended(row, 'succeeded')]);
    expect(await t.signal(id, 'go', 1)).toEqual({ jobId: id, outcome: 'ended' });
    expect(await t.signal('999999999', 'go', 1)).toEqual({ jobId: null, outcome: 'not_found' });
    const [other] = await t.enqueue('s');
    expect(await t.ledger.sendSignal({ namespace: ns(), jobId: other, jobKey: null, name: 'go', payloadJson: '1', idempotencyKey: null })).toEqual({ jobId: null, outcome: 'not_found' });
  });

  test('timeout: a heartbeat after the wait\'s timeout wakes it with {timedOut: true}; before it, nothing', async () => {
    const t = await setup(['s']);
    const [id] = await t.enqueue('s');
    const [row] = await t.claim('s');
    await t.complete([signalWait(row, ['go'], 'acta:signal:0', 10_000)]);
    const beat = () => t.ledger.heartbeat({ workerId: t.workerId, namespace: t.namespace, held: [], leaseMs: LEASE_MS });
    await beat();
    expect((await t.job(id)).status).toBe('waiting');
    await get().advance(10_001);
    await beat();
    expect((await t.job(id)).status).toBe('ready');
    expect(await t.ledger.loadSteps(id)).toEqual(new Map([['acta:signal:0', { timedOut: true }]]));
    expect(await t.signal(id, 'go', 'late')).toEqual({ jobId: id, outcome: 'queued' });
  });

  test('child tells parent: the parent waits until its last child ended, then runs again with the wait recorded; a retried spawn spawns nothing', async () => {
    const t = await setup(['p', 'c']);
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    const spawned = await t.spawn(parent, ['c', 'c']);
    expect(spawned.status).toBe('recorded');
    const childIds = (spawned.result as { ids: string[] }).ids;
    expect(childIds).toHaveLength(2);
    expect((await t.spawn(parent, ['c', 'c'])).status).toBe('exists');
    await t.complete([childrenWait(parent)]);
    expect((await t.job(parentId)).status).toBe('waiting');
    const children = await t.claim('c', 10);
    expect(children).toHaveLength(2);
    await t.complete([ended(children[0], 'succeeded')]);
    expect((await t.job(parentId)).status).toBe('waiting');
    await t.complete([ended(children[1], 'failed_final')]);
    expect((await t.job(parentId)).status).toBe('ready');
    expect((await t.ledger.loadSteps(parentId)).get('acta:children:0')).toEqual({});
    const outcomes = await t.ledger.readChildren(parentId, childIds);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['failed', 'succeeded']);
    const [again] = await t.claim('p');
    expect((await t.spawn(again, ['c', 'c'])).status).toBe('exists');
    expect(await t.claim('c', 10)).toEqual([]);
  });

  test('the last two children ending in one call resume the parent; children that ended before the wait make it not park', async () => {
    const t = await setup(['p', 'c']);
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    await t.spawn(parent, ['c', 'c', 'c']);
    await t.complete([childrenWait(parent)]);
    const children = await t.claim('c', 10);
    await t.complete([ended(children[0], 'succeeded')]);
    await t.complete([ended(children[1], 'succeeded'), ended(children[2], 'cancelled')]);
    expect((await t.job(parentId)).status).toBe('ready');

    const [early] = await t.enqueue('p');
    const p2 = (await t.claim('p', 10)).find((r) => r.id === early)!;
    await t.spawn(p2, ['c']);
    const [c] = await t.claim('c');
    await t.complete([ended(c, 'succeeded')]);
    await t.complete([childrenWait(p2)]);
    expect((await t.job(early)).status).toBe('ready');
  });

  test("a failed, cancelled or fail-parent child counts as ended; a 'fail-parent' failure wakes the parent at once", async () => {
    const t = await setup(['p', 'c']);
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    const ids = ((await t.spawn(parent, ['c', 'c', 'c'], [false, true, false])).result as { ids: string[] }).ids;
    await t.complete([childrenWait(parent)]);
    expect(await t.ledger.cancelJob(t.namespace, ids[0])).toBe('cancelled');
    expect((await t.job(parentId)).status).toBe('waiting');
    const running = await t.claim('c', 10);
    await t.complete([ended(running.find((r) => r.id === ids[1])!, 'failed_final')]);
    expect((await t.job(parentId)).status).toBe('ready');
    expect((await t.ledger.readChildren(parentId, ids)).map((o) => o.status)).toEqual(['cancelled', 'failed', 'executing']);
  });

  test('a spawn whose idempotency key names an existing job gets its id, not as a child; the children read reports that job as it is', async () => {
    const t = await setup(['p', 'c']);
    const [existing] = await t.enqueue('c', 1, { idempotencyKeys: ['shared'] });
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    const spawned = await t.ledger.spawnChildren({ workerId: t.workerId, parentId: parent.id, execution: parent.execution, step: 'acta:spawn:0', rows: rows(['c', 'c'], { idempotencyKeys: ['shared', null] }), failParent: [true, false] });
    const ids = (spawned.result as { ids: string[] }).ids;
    expect(ids[0]).toBe(existing);
    expect((await t.job(parentId)).status).toBe('executing');
    expect((await t.ledger.readChildren(parentId, ids)).map((o) => o.status)).toEqual(['ready', 'ready']);
    const [c] = (await t.claim('c', 10)).filter((r) => r.id === existing);
    await t.complete([ended(c, 'succeeded')]);
    expect((await t.ledger.readChildren(parentId, ids))[0]).toEqual({ id: existing, status: 'succeeded', result: { ok: existing } });
  });

  test('cancelling a parent cancels its unfinished children; a cancelled waiting job is Cancelled', async () => {
    const t = await setup(['p', 'c']);
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    const ids = ((await t.spawn(parent, ['c', 'c'])).result as { ids: string[] }).ids;
    await t.complete([childrenWait(parent)]);
    const [first] = await t.claim('c');
    expect(await t.ledger.cancelJob(t.namespace, parentId)).toBe('cancelled');
    const [a, b] = await Promise.all(ids.map((id) => t.job(id)));
    const byId = new Map([a, b].map((j) => [j.id, j]));
    expect(byId.get(first.id)).toMatchObject({ status: 'executing', cancelRequestedAt: expect.any(Date) });
    expect(byId.get(ids.find((i) => i !== first.id)!)).toMatchObject({ status: 'cancelled' });
    expect((await t.job(parentId)).status).toBe('cancelled');
  });

  test('a parent whose cancel was requested while it ran spawns no child (the cancel could not reach one spawned after it); a retried spawn step is still answered', async () => {
    const t = await setup(['p', 'c']);
    const [parentId] = await t.enqueue('p');
    const [parent] = await t.claim('p');
    const first = await t.spawn(parent, ['c'], [false], 'acta:spawn:0');
    expect(first.status).toBe('recorded');
    expect(await t.ledger.cancelJob(t.namespace, parentId)).toBe('requested');
    expect(await t.spawn(parent, ['c', 'c'], [false, false], 'acta:spawn:1')).toEqual({ status: 'cancelled', result: null });
    expect((await t.spawn(parent, ['c'], [false], 'acta:spawn:0')).status).toBe('exists');
    // The child spawned before the cancel was cancelled with it; none was spawned after: nothing to claim.
    expect((await t.job((first.result as { ids: string[] }).ids[0])).status).toBe('cancelled');
    expect(await t.claim('c', 5)).toEqual([]);
  });

  test("a spawn records which children it created in the parent's own lane (inLane: their indexes); none, or a parent with no lane, records none", async () => {
    const t = await setup(['p', 'c']);
    const [laned] = await t.enqueue('p', 1, { lanes: ['L'] });
    await t.enqueue('p', 1);
    const claimed = await t.claim('p', 2);
    const inL = claimed.find((r) => r.id === laned)!;
    const free = claimed.find((r) => r.id !== laned)!;
    await t.enqueue('c', 1, { idempotencyKeys: ['existing'], lanes: ['L'] });
    const childRows = rows(['c', 'c', 'c', 'c'], { lanes: ['L', 'M', null, 'L'], idempotencyKeys: [null, null, null, 'existing'] });
    const spawnIn = (parent: ClaimedRow, r: EnqueueRows, step = 'acta:spawn:0') =>
      t.ledger.spawnChildren({ workerId: t.workerId, parentId: parent.id, execution: parent.execution, step, rows: r, failParent: r.definitions.map(() => false) });
    const recorded = await spawnIn(inL, childRows);
    // Index 3 names an existing job in lane L: not a child, so not listed.
    expect(recorded).toMatchObject({ status: 'recorded', result: { inLane: [0] } });
    expect(await spawnIn(inL, childRows)).toEqual({ status: 'exists', result: recorded.result });
    expect((await spawnIn(inL, rows(['c'], { lanes: ['M'] }), 'acta:spawn:1')).result).not.toHaveProperty('inLane');
    expect((await spawnIn(free, rows(['c'], { lanes: ['L'] }))).result).not.toHaveProperty('inLane');
  });

  test("a spawn also records the children in the lane of an ancestor that has not ended (a grandparent waiting for the parent); not of one that ended", async () => {
    const t = await setup(['g', 'p', 'c']);
    const [waiting] = await t.enqueue('g', 1, { lanes: ['G'] });
    const [g] = await t.claim('g');
    expect(g.id).toBe(waiting);
    const [parentId] = ((await t.spawn(g, ['p'])).result as { ids: string[] }).ids;
    await t.complete([childrenWait(g)]);
    const [parent] = await t.claim('p');
    expect(parent.id).toBe(parentId);
    const spawnIn = (row: ClaimedRow, r: EnqueueRows) =>
      t.ledger.spawnChildren({ workerId: t.workerId, parentId: row.id, execution: row.execution, step: 'acta:spawn:0', rows: r, failParent: r.definitions.map(() => false) });
    expect((await spawnIn(parent, rows(['c', 'c', 'c'], { lanes: ['M', 'G', null] }))).result).toMatchObject({ inLane: [1] });

    // An ancestor that ended holds no lane: nothing recorded.
    await t.enqueue('g', 1, { lanes: ['H'] });
    const [g2] = await t.claim('g');
    const [p2Id] = ((await t.spawn(g2, ['p'])).result as { ids: string[] }).ids;
    await t.complete([ended(g2, 'succeeded')]);
    const [p2] = await t.claim('p');
    expect(p2.id).toBe(p2Id);
    expect((await spawnIn(p2, rows(['c'], { lanes: ['H'] }))).result).not.toHaveProperty('inLane');
  });

  test("a waiting lane head keeps its lane held: the rows behind it wait until it ends, not when it parks or wakes", async () => {
    const t = await setup(['l']);
    const [head, behind] = await t.enqueue('l', 2, { lanes: ['L', 'L'] });
    const [row] = await t.claim('l', 2);
    expect(row.id).toBe(head);
    expect(await t.claim('l', 2)).toEqual([]);
    await t.complete([signalWait(row, ['go'])]);
    expect((await t.job(head)).status).toBe('waiting');
    expect(await t.claim('l', 2)).toEqual([]);
    expect((await t.job(behind)).status).toBe('ready');
    expect(await t.signal(head, 'go', 1)).toEqual({ jobId: head, outcome: 'consumed' });
    const [again] = await t.claim('l', 2);
    expect(again).toMatchObject({ id: head, execution: 2 });
    expect(await t.claim('l', 2)).toEqual([]);
    await t.complete([ended(again, 'succeeded')]);
    expect((await t.claim('l', 2)).map((r) => r.id)).toEqual([behind]);
  });
}
