// The contract's retention-zero cases (contract.ts runs them on both ledgers; docs/retention.md,
// "Retention zero"): where the namespace's sys.retention keeps Succeeded rows 0 ms, a completion
// deletes the rows it ended Succeeded, with their attempts, in its own call; rows that must stay,
// other outcomes, a paused sys.retention and other namespaces keep theirs.
import { randomUUID } from 'node:crypto';
import { type Definition, defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import type { EnqueueRows } from '../../src/db/jobs';
import type { ClaimedRow, CompletionRow } from '../../src/db/types';
import { cronSchedule } from '../../src/recurring/cron';
import { RETENTION_CRON } from '../../src/recurring/retention';
import { systemDefinitions } from '../../src/recurring/system';
import type { LedgerUnderTest } from './contract';
import { rows } from './workflows';

const LEASE_MS = 60_000;
const ended = (r: ClaimedRow, outcome: CompletionRow['outcome'], more: Partial<CompletionRow> = {}): CompletionRow => ({
  id: r.id,
  execution: r.execution,
  outcome,
  result: outcome === 'succeeded' ? JSON.stringify({ ok: true }) : null,
  error: outcome.startsWith('failed') ? JSON.stringify({ name: 'Error', message: 'x' }) : null,
  retryDelayMs: 0,
  ...more,
});

export function retentionZeroCases(get: () => LedgerUnderTest): void {
  /** A worker of a new namespace running 'r' (and 'sys.retention' declared with `retention`, if given). */
  const setup = async (retention?: { succeededMs?: number }, r: Definition = defineJob({ name: 'r', handler: () => undefined })) => {
    const { ledger } = get();
    const namespace = `rz-${randomUUID().slice(0, 8)}`;
    const workerId = randomUUID();
    const defs: Definition[] = [r, ...(retention ? systemDefinitions({ ledger, namespace, retention }) : [])];
    await ledger.registerWorker({
      workerId, namespace, hostname: 'contract', pid: 1, definitions: defs.map((d) => d.name), maxAttempts: defs.map(() => null), leaseMs: LEASE_MS, build: null,
      policies: Object.fromEntries(defs.map((d) => [d.name, declaredPolicy(d)])),
    });
    const enqueue = async (n: number, more: Partial<EnqueueRows> = {}) => (await ledger.enqueueJobs(namespace, rows(Array(n).fill('r'), more))).map((r) => r.id as string);
    const claim = async (definition = 'r') => (await ledger.claimJobs({ namespace, workerId, definitions: [definition], limit: 10, leaseMs: LEASE_MS })).rows;
    const byId = async () => new Map((await claim()).map((r) => [r.id, r]));
    const complete = (completions: CompletionRow[]) => ledger.completeExecutions(workerId, completions);
    const kept = async (ids: string[]) => (await Promise.all(ids.map((id) => ledger.readJob(namespace, id)))).map((j) => j?.status ?? 'gone');
    return { ledger, namespace, workerId, enqueue, claim, byId, complete, kept };
  };

  test('a Succeeded row goes in its completion\'s call with its attempts; a failed, a retried and a watched row stay; the key is free at once (dedupe window 0)', async () => {
    const t = await setup({ succeededMs: 0 });
    const [plain, keyed, failed, retried, watched] = await t.enqueue(5, { idempotencyKeys: [null, 'k', null, null, null] });
    expect(await t.ledger.watchJob(t.namespace, watched)).toBe(true);
    const claimed = await t.byId();
    const acks = await t.complete([
      ended(claimed.get(plain)!, 'succeeded'),
      ended(claimed.get(keyed)!, 'succeeded'),
      ended(claimed.get(failed)!, 'failed_final'),
      ended(claimed.get(retried)!, 'failed', { retryDelayMs: 60_000 }),
      ended(claimed.get(watched)!, 'succeeded'),
    ]);
    expect(acks.map((a) => a.status)).toEqual(['succeeded', 'succeeded', 'failed', 'ready', 'succeeded']);
    expect(await t.kept([plain, keyed, failed, retried, watched])).toEqual(['gone', 'gone', 'failed', 'ready', 'succeeded']);
    const [again] = await t.ledger.enqueueJobs(t.namespace, rows(['r'], { idempotencyKeys: ['k'] }));
    expect(again).toMatchObject({ created: true });
    expect(again.id).not.toBe(keyed);
    // The pass takes the watched row (age 0: every Succeeded row finished before it).
    await get().advance(1);
    expect(await t.ledger.pruneJobs({ namespace: t.namespace, ages: { succeededMs: 0, cancelledMs: null, failedMs: null }, limit: 10, timeoutMs: 10_000 })).toBe(1);
    expect(await t.kept([watched, failed])).toEqual(['gone', 'failed']);
  });

  test('only where sys.retention says succeededMs 0 and is not paused: another age, no sys.retention, or a paused one keep the row', async () => {
    for (const retention of [{ succeededMs: 1 }, undefined]) {
      const t = await setup(retention);
      const [id] = await t.enqueue(1);
      await t.complete([ended((await t.claim())[0], 'succeeded')]);
      expect(await t.kept([id])).toEqual(['succeeded']);
    }
    const t = await setup({ succeededMs: 0 });
    expect(await t.ledger.pauseSchedule!(t.namespace, 'sys.retention', true)).toBe(true);
    const [paused] = await t.enqueue(1);
    await t.complete([ended((await t.claim())[0], 'succeeded')]);
    expect(await t.kept([paused])).toEqual(['succeeded']);
    expect(await t.ledger.pauseSchedule!(t.namespace, 'sys.retention', false)).toBe(true);
    const [resumed] = await t.enqueue(1);
    await t.complete([ended((await t.claim())[0], 'succeeded')]);
    expect(await t.kept([paused, resumed])).toEqual(['succeeded', 'gone']);
  });

  test('a schedule\'s fire that succeeds arms its next instant, then goes; a child stays while its parent waits', async () => {
    const t = await setup({ succeededMs: 0 });
    expect(await t.ledger.armSchedules!(t.namespace)).toBe(1);
    await get().advance(60_000);
    const [fire] = await t.claim('sys.retention');
    const next = cronSchedule(RETENTION_CRON).next(fire.schedule!.at)!;
    expect((await t.complete([ended(fire, 'succeeded', { nextFireAt: next })]))[0].status).toBe('succeeded');
    expect(await t.kept([fire.id])).toEqual(['gone']);
    const [schedule] = await t.ledger.listSchedules!(t.namespace, 'sys.retention');
    expect(schedule).toMatchObject({ nextFireAt: next, lastOutcome: 'succeeded', lastJobId: fire.id });
    expect(await t.kept([schedule.jobId!])).toEqual(['ready']);

    const [parentId] = await t.enqueue(1);
    const parent = (await t.claim())[0];
    expect(parent.id).toBe(parentId);
    await t.ledger.spawnChildren({ workerId: t.workerId, parentId, execution: parent.execution, step: 'acta:spawn:0', rows: rows(['r']), failParent: [false] });
    await t.complete([{ ...ended(parent, 'children_wait'), result: JSON.stringify({ step: 'acta:children:0', timeoutMs: null }) }]);
    const [child] = await t.claim();
    await t.complete([ended(child, 'succeeded')]);
    expect(await t.kept([child.id, parentId])).toEqual(['succeeded', 'ready']);
  });

  test('a batch of rows that go and rows that stay answers in input order (a stale element x); a gone row\'s steps go with it, and its concurrency slot and lane pass on', async () => {
    const t = await setup({ succeededMs: 0 }, defineJob({ name: 'r', handler: () => undefined, concurrency: { key: () => 'k', limit: 1 }, lane: () => 'l' }));
    const [keyed, keyedNext] = await t.enqueue(2, { concurrencyKeys: ['k', 'k'] });
    const [laned, lanedNext] = await t.enqueue(2, { lanes: ['l', 'l'] });
    const [failed, plain] = await t.enqueue(2);
    const first = await t.byId();
    expect([...first.keys()].sort()).toEqual([keyed, laned, failed, plain].sort());
    expect((await t.ledger.recordStep({ workerId: t.workerId, jobId: plain, execution: first.get(plain)!.execution, name: 's', resultJson: '1' })).status).toBe('recorded');
    const acks = await t.complete([
      ended(first.get(failed)!, 'failed_final'),
      ended(first.get(keyed)!, 'succeeded'),
      ended({ ...first.get(plain)!, execution: first.get(plain)!.execution + 1 }, 'succeeded'),
      ended(first.get(laned)!, 'succeeded'),
      ended(first.get(plain)!, 'succeeded'),
    ]);
    expect(acks.map((a) => a.status)).toEqual(['failed', 'succeeded', 'stale', 'succeeded', 'succeeded']);
    expect(await t.kept([failed, keyed, laned, plain])).toEqual(['failed', 'gone', 'gone', 'gone']);
    expect((await t.ledger.loadSteps(plain)).size).toBe(0);
    // The key's slot and the lane are free: the rows behind them are claimed next.
    expect([...(await t.byId()).keys()].sort()).toEqual([keyedNext, lanedNext].sort());
  });
  test("failure_rate judges only the time sys.retention keeps both outcomes: under retention zero no success is left to count, so failures are no rate; with a shorter age the window narrows to it", async () => {
    const thresholds = { deadWindowMs: 900_000, readyAgeMs: 300_000, failureWindowMs: 900_000, failureRate: 0.5, failureMinJobs: 3, keepResolvedMs: 86_400_000, scheduleLateMs: 60_000 };
    const run = async (t: Awaited<ReturnType<typeof setup>>) => {
      await t.enqueue(10);
      const first = [...(await t.byId()).values()];
      await t.complete(first.map((r, i) => ended(r, i < 3 ? 'failed_final' : 'succeeded'))); // 3 of 10 failed
      return t.ledger.evaluateAlerts({ namespace: t.namespace, thresholds, onAlert: null });
    };
    expect((await run(await setup({ succeededMs: 0 }))).filter((a) => a.rule === 'failure_rate')).toEqual([]);
    const narrowed = await setup({ succeededMs: 60_000 });
    await narrowed.enqueue(3);
    await narrowed.complete([...(await narrowed.byId()).values()].map((r) => ended(r, 'failed_final')));
    expect((await narrowed.ledger.evaluateAlerts({ namespace: narrowed.namespace, thresholds, onAlert: null })).map((a) => [a.rule, a.detail])).toEqual([
      ['failure_rate', { failed: 3, succeeded: 0, windowMs: 60_000 }],
    ]);
  });
}
