// The in-memory ledger of acta/testing (src/testing/memoryLedger.ts) on a virtual clock: the
// contract (contract.ts) it shares with the SQL, then what is its own: latency, faults, its state.
import { ConfigError, createClient, createWorker, type Definition, defineJob } from '../../src';
import type { EnqueueRows } from '../../src/db/jobs';
import { isTransientDbError } from '../../src/db/transient';
import { declaredPolicy } from '../../src/definition';
import type { Ledger } from '../../src/ledger';
import { InjectedConnectionError, memoryLedger, type MemoryLedgerOptions, VirtualClock } from '../../src/testing';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import { ledgerContract } from './contract';

/**
 * A memory ledger on a VirtualClock (acta/testing), and `ledger`: the same, whose every call then
 * runs the clock's current instant, so that an answer without latency (and a wakeup) is there when
 * its promise is awaited; synchronously, so that it never races the clock's own advance(ms).
 */
function onVirtualTime() {
  const clock = new VirtualClock();
  const runNow = () => {
    clock.scheduler.maxFrames = clock.scheduler.frame;
    clock.scheduler.flush();
    clock.scheduler.maxFrames = Number.POSITIVE_INFINITY;
  };
  const memory = memoryLedger({ scheduler: clock.scheduler });
  const ledger = new Proxy(memory, {
    get(target, name) {
      const value = Reflect.get(target, name) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const answer = (value as (...a: unknown[]) => unknown).apply(target, args);
        runNow();
        return answer;
      };
    },
  }) as Ledger;
  return { ledger, now: async () => clock.now(), advance: (ms: number) => clock.advance(ms) };
}

describe('the contract', () => ledgerContract(() => onVirtualTime()));

describe('the memory ledger', () => {
  const rows = (n: number, more: Partial<EnqueueRows> = {}): EnqueueRows => ({
    definitions: Array.from({ length: n }, () => 'd'),
    payloads: Array.from({ length: n }, (_, i) => JSON.stringify({ i })),
    priorities: Array.from({ length: n }, () => null),
    runAts: Array.from({ length: n }, () => null),
    maxAttempts: Array.from({ length: n }, () => null),
    idempotencyKeys: Array.from({ length: n }, () => null),
    ...more,
  });
  /** A ledger on a VirtualClock, and `runTo(frame)`: the clock to that time (from where it is), promises settled. */
  function virtual(options: Omit<MemoryLedgerOptions, 'scheduler'> = {}) {
    const clock = new VirtualClock();
    const ledger = memoryLedger({ ...options, scheduler: clock.scheduler });
    return { ledger, runTo: (frame: number) => clock.advance(frame - clock.now()) };
  }
  const claimArgs = { namespace: 'default', workerId: 'w', definitions: ['d'], limit: 10, leaseMs: 1_000 };

  test('a call takes effect when it is made, at the clock\'s now; its answer arrives its latency later, one for all calls or per call, settable', async () => {
    const { ledger, runTo } = virtual({ latencyMs: { claimJobs: 30, enqueueJobs: 5 } });
    const seen: string[] = [];
    void ledger.enqueueJobs('default', rows(2)).then(() => seen.push('enqueued'));
    expect(ledger.state().jobs.map((j) => j.status)).toEqual(['ready', 'ready']);
    await runTo(4);
    expect(seen).toEqual([]);
    await runTo(5);
    expect(seen).toEqual(['enqueued']);
    void ledger.claimJobs(claimArgs).then((r) => seen.push(`claimed ${r.rows.length}`));
    // Claimed at 5: the lease runs from the claim, not from its answer's arrival.
    expect(ledger.state().jobs.map((j) => [j.status, j.claimedAt, j.leaseExpiresAt])).toEqual([
      ['executing', 5, 1_005],
      ['executing', 5, 1_005],
    ]);
    await runTo(34);
    expect(seen).toEqual(['enqueued']);
    await runTo(35);
    expect(seen).toEqual(['enqueued', 'claimed 2']);
    ledger.setLatency(100);
    void ledger.readJob('default', '1').then(() => seen.push('read'));
    await runTo(134);
    expect(seen).toHaveLength(2);
    await runTo(135);
    expect(seen).toHaveLength(3);
  });

  test('failCalls: the next calls of a kind fail with a transient error and change nothing; or every call for a while', async () => {
    const { ledger, runTo } = virtual({ latencyMs: 10 });
    ledger.failCalls(['enqueueJobs', 'claimJobs'], { times: 2 });
    const failed: unknown[] = [];
    for (let i = 0; i < 2; i++) void ledger.enqueueJobs('default', rows(1)).catch((err) => failed.push(err));
    const third = ledger.enqueueJobs('default', rows(1));
    expect(ledger.state().jobs).toHaveLength(1);
    await runTo(10);
    expect(failed).toHaveLength(2);
    for (const err of failed) {
      expect(isTransientDbError(err)).toBe(true);
      expect(err).toBeInstanceOf(InjectedConnectionError);
      expect(err).toMatchObject({ code: '08006', message: expect.stringContaining('enqueueJobs failed') });
    }
    await expect(third).resolves.toEqual([{ id: '1', created: true }]); // the failed calls drew no id: they did nothing
    ledger.failCalls('heartbeat', { forMs: 1_000 });
    const beat = () => ledger.heartbeat({ workerId: 'w', namespace: 'default', held: [], leaseMs: 1_000 });
    const during = [beat().catch((err: unknown) => err)];
    await runTo(1_009);
    during.push(beat().catch((err: unknown) => err));
    await runTo(1_019); // its answer's arrival; the window, from frame 10, has passed
    for (const err of await Promise.all(during)) expect(isTransientDbError(err)).toBe(true);
    const after = beat();
    await runTo(1_029);
    await expect(after).resolves.toMatchObject({ duePasses: ['recovery'] });
  });

  test('loseAnswers: the call takes effect and its promise rejects with the transient error, as a commit whose answer a dropped connection lost', async () => {
    const { ledger, runTo } = virtual();
    await Promise.all([ledger.enqueueJobs('default', rows(1)), runTo(0)]);
    ledger.loseAnswers('claimJobs', { times: 1 });
    const lost = ledger.claimJobs(claimArgs).catch((err: unknown) => err);
    await runTo(0);
    const err = await lost;
    expect(isTransientDbError(err)).toBe(true);
    expect(err).toMatchObject({ message: expect.stringContaining('claimJobs answer lost') });
    expect(ledger.state().jobs.map((j) => [j.status, j.execution, j.leaseHolder])).toEqual([['executing', 1, 'w']]);
    const next = ledger.claimJobs(claimArgs);
    await runTo(0);
    await expect(next).resolves.toEqual({ rows: [], nextDueInMs: null });
  });

  test('listen: in effect on the clock (onConnect once); each wakeup goes to every listener of acta_jobs with the namespace, until it unlistens', async () => {
    const { ledger, runTo } = virtual({ latencyMs: { listen: 3 } });
    const got: string[] = [];
    let connects = 0;
    const listening = ledger.listen('acta_jobs', { onNotify: (ns) => got.push(`a:${ns}`), onConnect: () => connects++ });
    const other = ledger.listen('another', { onNotify: (ns) => got.push(`other:${ns}`) });
    await runTo(2);
    expect(connects).toBe(0);
    await runTo(3);
    expect(connects).toBe(1);
    const unlisten = await listening;
    await other;
    const unlistenB = ledger.listen('acta_jobs', { onNotify: (ns) => got.push(`b:${ns}`) });
    await runTo(6);
    void ledger.enqueueJobs('ns1', rows(1));
    await runTo(6);
    expect(got).toEqual(['a:ns1', 'b:ns1']);
    await unlisten();
    void ledger.enqueueJobs('ns2', rows(1));
    await runTo(6);
    expect(got).toEqual(['a:ns1', 'b:ns1', 'b:ns2']);
    await (await unlistenB)();
  });

  test('state() is a copy of every table, for assertions: rows with their parking, turns and leases, the ledger, steps, gates with their meters', async () => {
    const { ledger, runTo } = virtual();
    const settle = async <T>(p: Promise<T>) => (await Promise.all([p, runTo(0)]))[0];
    const policy = (d: Definition) => declaredPolicy(d);
    const metered = defineJob({ name: 'd', handler: () => undefined, rate: { limit: 1, perMs: 1_000 } });
    await settle(ledger.registerWorker({ workerId: 'w', namespace: 'default', hostname: 'h', pid: 1, definitions: ['d'], leaseMs: 1_000, policies: { d: policy(metered) } }));
    await settle(ledger.enqueueJobs('default', rows(2, { rateKeys: ['m', 'm'] })));
    const [row] = (await settle(ledger.claimJobs(claimArgs))).rows;
    await settle(ledger.recordStep({ workerId: 'w', jobId: row.id, execution: 1, name: 's', resultJson: '{"a":1}' }));
    await settle(ledger.completeExecutions('w', [{ id: row.id, execution: 1, outcome: 'succeeded', result: '2', error: null, retryDelayMs: 0 }]));
    const state = ledger.state();
    expect(state.jobs).toMatchObject([
      { id: 1, status: 'succeeded', result: 2, rateKey: 'm', blockedBy: null, execution: 1, attempts: 1, finishedAt: 0 },
      { id: 2, status: 'ready', blockedBy: 'rate', fairTag: null, execution: 0 },
    ]);
    expect(state.executions).toEqual([{ jobId: 1, execution: 1, workerId: 'w', claimedAt: 0, finishedAt: 0, outcome: 'succeeded', charged: true, error: null }]);
    expect(state.steps).toEqual([{ jobId: 1, name: 's', execution: 1, result: { a: 1 }, recordedAt: 0 }]);
    expect(state.gates).toEqual([{ namespace: 'default', kind: 'rate', key: 'm', recheckAt: 1_000, starts: 1, startsPruned: 0, shutUntil: null }]);
    expect(state.meterStarts).toEqual([{ namespace: 'default', key: 'm', at: 0, upto: 1 }]);
    expect(state.workers).toMatchObject([{ id: 'w', status: 'alive', definitions: ['d'] }]);
    expect(state.definitions).toMatchObject([{ name: 'd', rateLimit: 1, ratePerMs: 1_000 }]);
    expect(state.passes).toEqual([{ namespace: 'default', pass: 'recovery', dueAt: 1_000 }]);
    expect(state.namespaces).toEqual([{ name: 'default', createdAt: 0, policyVersion: 1 }]);
    state.jobs[1].status = 'cancelled';
    expect(ledger.state().jobs[1].status).toBe('ready');
  });

  test('on the default scheduler, in real time, a worker and a client run on it: a key of limit 1 held, a step, a retry', async () => {
    const ledger = memoryLedger();
    const job = defineJob({
      name: 'j',
      backoff: { delayMs: 10 },
      concurrency: { key: () => 'k', limit: 1 },
      handler: async (p: { i: number }, ctx) => {
        await ctx.step('s', () => p.i);
        if (p.i === 2 && ctx.attempt === 1) throw new Error('once');
        return p.i * 2;
      },
    });
    const worker = createWorker({ ledger, definitions: [job], logger: silentLogger, executors: 4, heartbeatIntervalMs: 200 });
    await worker.start();
    const client = createClient({ force: true, ledger, definitions: [job] });
    const ids = await client.enqueueMany([0, 1, 2, 3].map((i) => ({ definition: job, payload: { i } })));
    const read = () => Promise.all(ids.map((r) => client.getJob(r.id)));
    await waitFor(async () => (await read()).every((j) => j?.status === 'succeeded'), 'every job to succeed');
    await worker.stop();
    expect((await read()).map((j) => [j?.result, j?.attempts])).toEqual([[0, 1], [2, 1], [4, 2], [6, 1]]);
    const { executions, steps, workers } = ledger.state();
    expect(executions.map((e) => e.outcome).sort()).toEqual(['failed', 'succeeded', 'succeeded', 'succeeded', 'succeeded']);
    // One attempt of the key at a time: each starts after the one before it ended.
    const byStart = [...executions].sort((a, b) => a.claimedAt - b.claimedAt);
    byStart.slice(1).forEach((e, i) => expect(e.claimedAt).toBeGreaterThanOrEqual(byStart[i].finishedAt));
    expect(steps.map((st) => [st.jobId, st.execution])).toEqual([[1, 1], [2, 1], [3, 1], [4, 1]]);
    expect(workers.map((w) => w.status)).toEqual(['stopped']);
  });

  test('options and knobs it cannot take are refused with ConfigError', () => {
    expect(() => memoryLedger({ latency: 1 } as MemoryLedgerOptions)).toThrow(ConfigError);
    expect(() => memoryLedger({ latencyMs: -1 })).toThrow(/latencyMs must be a finite number/);
    expect(() => memoryLedger({ latencyMs: { claim: 1 } as MemoryLedgerOptions['latencyMs'] })).toThrow(/"claim" is not a ledger call/);
    const ledger = memoryLedger();
    expect(() => ledger.failCalls('listen' as never, { times: 1 })).toThrow(/not a ledger call/);
    expect(() => ledger.failCalls('claimJobs', { times: 0 })).toThrow(/at least 1/);
    expect(() => ledger.failCalls('claimJobs', { forMs: Number.POSITIVE_INFINITY })).toThrow(ConfigError);
    // Was: { times, forMs } failed the calls `times` times and dropped forMs; {} blamed a forMs it was not given.
    expect(() => ledger.failCalls('claimJobs', { times: 1, forMs: 5_000 } as never)).toThrow('failCalls: give either times or forMs, not both (nor neither)');
    expect(() => ledger.failCalls('claimJobs', {} as never)).toThrow('failCalls: give either times or forMs, not both (nor neither)');
    expect(() => ledger.loseAnswers('claimJobs', { times: 1.5 })).toThrow(ConfigError);
    expect(() => ledger.setLatency(Number.NaN)).toThrow(ConfigError);
  });
});
