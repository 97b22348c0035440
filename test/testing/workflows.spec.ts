// Workflows in virtual time (acta/testing): a whole worker on the memory ledger, as a user tests
// their own workflows without a database (docs/workflows.md). A parked job resumes on a signal,
// and a parent resumes when its children end, at exact virtual times.
import pino from 'pino';
import { createClient, createWorker, type Definition, defineJob, type WorkerEvent } from '../../src';
import { memoryLedger, VirtualClock } from '../../src/testing';

const silent = pino({ level: 'silent' });

async function virtualWorker(clock: VirtualClock, definitions: Definition[]) {
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const worker = createWorker({ ledger, definitions, scheduler: clock.scheduler, random: () => 0, executors: 4, heartbeatIntervalMs: 10_000, logger: silent });
  const events = clock.record(worker.events$);
  await clock.await(worker.start());
  await clock.advance(10 - clock.now());
  const client = createClient({ ledger, definitions });
  const stop = async () => {
    const stopped = worker.stop();
    await clock.advanceUntil(() => events.entries.some((e) => e.value.type === 'stopped'), { stepMs: 10 });
    await stopped;
  };
  return { ledger, client, events, stop };
}

const typesOf = (events: { entries: { at: number; value: WorkerEvent }[] }, types: WorkerEvent['type'][]) =>
  events.entries.filter((e) => types.includes(e.value.type)).map((e) => `${e.at}:${e.value.type}`);

test('a parked job resumes on a signal: the wait parks it (no attempt charged), the signal at 500 wakes it, the same call returns the payload', async () => {
  const clock = new VirtualClock();
  const seen: unknown[] = [];
  const approve = defineJob({
    name: 'approve',
    handler: async (_p: unknown, ctx) => {
      const before = await ctx.step('before', () => 'done');
      const decision = await ctx.waitForSignal<{ ok: boolean }>('decision');
      seen.push([before, decision]);
      return decision;
    },
  });
  const { client, ledger, events, stop } = await virtualWorker(clock, [approve]);
  const { id } = await clock.await(client.enqueue(approve, {}));
  await clock.advance(490 - clock.now());
  expect((await clock.await(client.getJob(id)))!.status).toBe('waiting');
  await clock.advance(500 - clock.now());
  expect(await clock.await(client.signal(id, 'decision', { ok: true }))).toEqual({ delivered: true, jobId: id, consumed: true });
  await clock.advance(100);
  // Claimed at 10, started at 11; the step's read and record answer at 12 and 13, the wait's read
  // of the steps at 14, and the park is written at 15. The signal, applied at 500, wakes the
  // claimer (NOTIFY) at once: claimed at 500, started at 501; the replayed step and the wait read
  // the steps (502, 503) and the success is written at 504.
  expect(typesOf(events, ['started', 'waiting', 'succeeded'])).toEqual(['11:started', '15:waiting', '501:started', '504:succeeded']);
  expect(seen).toEqual([['done', { ok: true }]]);
  const job = (await clock.await(client.getJob(id)))!;
  expect(job).toMatchObject({ status: 'succeeded', attempts: 1, result: { ok: true } });
  expect(job.executions.map((e) => [e.outcome, e.charged])).toEqual([
    ['signal_wait', false],
    ['succeeded', true],
  ]);
  expect(ledger.state().signals).toMatchObject([{ name: 'decision', consumedStep: 'acta:signal:0' }]);
  await stop();
});

test('a parent spawns children once and resumes when the last one ends, with each outcome', async () => {
  const clock = new VirtualClock();
  let spawnedRuns = 0;
  const child = defineJob({
    name: 'child',
    handler: (p: { n: number }) => {
      if (p.n === 2) throw new Error('two fails');
      return p.n * 10;
    },
    maxAttempts: 1,
  });
  const parent = defineJob({
    name: 'parent',
    handler: async (_p: unknown, ctx) => {
      const ids = await ctx.spawnMany([1, 2, 3].map((n) => ({ definition: child, payload: { n } })));
      spawnedRuns++;
      const outcomes = await ctx.waitForChildren();
      return { ids, outcomes: outcomes.map((o) => [o.status, o.result ?? o.error?.message]) };
    },
  });
  const { client, events, stop } = await virtualWorker(clock, [parent, child]);
  const { id } = await clock.await(client.enqueue(parent, {}));
  await clock.advance(1_000);
  const job = (await clock.await(client.getJob(id)))!;
  expect(job.status).toBe('succeeded');
  expect(job.result).toMatchObject({ outcomes: [['succeeded', 10], ['failed', 'two fails'], ['succeeded', 30]] });
  expect(spawnedRuns).toBe(2); // the spawn step ran once and was replayed once
  expect(typesOf(events, ['waiting']).length).toBe(1);
  await stop();
});

test('spawnMany([]) spawns nothing and records no step: it returns [], the spawns after it keep their step names, and a retried attempt sees the same', async () => {
  const clock = new VirtualClock();
  const child = defineJob({ name: 'child', handler: (p: { n: number }) => p.n });
  let runs = 0;
  const parent = defineJob({
    name: 'parent',
    backoff: () => 10,
    handler: async (_p: unknown, ctx) => {
      const none = await ctx.spawnMany([]);
      const ids = await ctx.spawnMany([{ definition: child, payload: { n: 1 } }]);
      const more = await ctx.spawnMany([]);
      // The first attempt fails after its spawn: the retry replays the spawn step, spawning nothing more.
      if (++runs === 1) throw new Error('once');
      return { none, more, ids, outcomes: (await ctx.waitForChildren()).map((o) => o.result) };
    },
  });
  const { client, ledger, stop } = await virtualWorker(clock, [parent, child]);
  const { id } = await clock.await(client.enqueue(parent, {}));
  await clock.advance(1_000);
  const job = (await clock.await(client.getJob(id)))!;
  expect(job).toMatchObject({ status: 'succeeded', attempts: 2, result: { none: [], more: [], outcomes: [1] } });
  const steps = ledger.state().steps.filter((s) => s.jobId === Number(id)).map((s) => s.name);
  expect(steps.sort()).toEqual(['acta:children:0', 'acta:spawn:0']);
  expect(ledger.state().jobs.filter((j) => j.definition === 'child')).toHaveLength(1);
  await stop();
});

test('a child named by a definition no worker declared is refused (EnqueueRefusedError) on the memory ledger as on PostgreSQL: nothing spawned, the parent fails', async () => {
  const clock = new VirtualClock();
  const parent = defineJob({ name: 'parent', maxAttempts: 1, handler: async (_p: unknown, ctx) => ctx.spawn('kdi', {}) });
  const { client, ledger, stop } = await virtualWorker(clock, [parent]);
  const { id } = await clock.await(client.enqueue(parent, {}));
  await clock.advance(1_000);
  const job = (await clock.await(client.getJob(id)))!;
  expect(job).toMatchObject({ status: 'failed', error: { name: 'EnqueueRefusedError', code: 'ACTA_UNKNOWN_DEFINITION' } });
  expect(job.error!.message).toBe('no worker has declared a job definition named "kdi" in namespace "default"; start its worker first, or to enqueue it anyway (a definition whose worker has not started yet): the spawn option { force: true }');
  expect(ledger.state().jobs.map((j) => j.definition)).toEqual(['parent']);
  await stop();
});

test('waitForChildren(ids) waits for every child spawned so far and returns the outcomes of the ids given, in their order; an id no spawn of the attempt returned fails the job without retry', async () => {
  const clock = new VirtualClock();
  const child = defineJob({ name: 'child', handler: (p: { n: number }) => ({ tens: p.n * 10 }) });
  const gate = defineJob({ name: 'gate', handler: async (_p: unknown, ctx) => ctx.waitForSignal<string>('go') });
  const parent = defineJob({
    name: 'parent',
    handler: async (_p: unknown, ctx) => {
      const a = await ctx.spawn(child, { n: 1 });
      await ctx.spawn(gate, {}); // not named below, still waited for
      const c = await ctx.spawn(child, { n: 3 });
      const [first, second] = await ctx.waitForChildren([c, a]);
      return { a, c, tens: [first.result?.tens, second.result?.tens], outcomes: [first, second] };
    },
  });
  const stranger = defineJob({ name: 'stranger', handler: async (_p: unknown, ctx) => ctx.waitForChildren(['999']) });
  const { client, ledger, stop } = await virtualWorker(clock, [parent, child, gate, stranger]);
  const { id } = await clock.await(client.enqueue(parent, {}));
  await clock.advance(500);
  expect((await clock.await(client.getJob(id)))!.status).toBe('waiting'); // the gate has not ended
  const gateId = String(ledger.state().jobs.find((j) => j.definition === 'gate')!.id);
  await clock.await(client.signal(gateId, 'go', 'now'));
  await clock.advance(500);
  const job = (await clock.await(client.getJob(id)))!;
  expect(job.status).toBe('succeeded');
  const { a, c } = job.result as { a: string; c: string };
  expect(job.result).toEqual({ a, c, tens: [30, 10], outcomes: [{ id: c, status: 'succeeded', result: { tens: 30 } }, { id: a, status: 'succeeded', result: { tens: 10 } }] });
  expect((await clock.await(client.getJob(gateId)))!.status).toBe('succeeded');

  const refused = await clock.await(client.enqueue(stranger, {}));
  await clock.advance(500);
  const failed = (await clock.await(client.getJob(refused.id)))!;
  expect(failed).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'ConfigError' } });
  expect(failed.error!.message).toBe('waitForChildren was given "999", which no spawn of this attempt returned (spawned so far: 0)');
  await stop();
});
