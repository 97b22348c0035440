// What a worker logs when its completions are fenced out (docs/operating.md, "Logs"): after a stall
// (a worker paused past its lease, then resumed) every attempt it held ends with a late completion
// the fence refuses. One warning per written batch counts them and names the first 10 jobs; the
// per-completion `stale` event stays on events$. A whole worker in virtual time on the memory
// ledger, whose leases injectFaults loses (acta/testing).
import pino from 'pino';
import { createClient, createWorker, defineJob, type WorkerEvent } from '../../src';
import { injectFaults, memoryLedger, VirtualClock } from '../../src/testing';

const N = 30;

test(`${N} fenced-out completions: one warning per written batch, with their count and the first 10 job ids; a stale event each`, async () => {
  const clock = new VirtualClock();
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const noop = defineJob({ name: 'noop', handler: () => 'late' });
  const worker = createWorker({ ledger: faults.ledger, definitions: [noop], scheduler: clock.scheduler, random: () => 0, executors: 32, heartbeatIntervalMs: 10_000, logger });
  const events = clock.record(worker.events$);
  await clock.await(worker.start());
  const client = createClient({ ledger, definitions: [noop], scheduler: clock.scheduler });
  const ids = (await clock.await(client.enqueueMany(Array.from({ length: N }, (_, i) => ({ definition: noop, payload: { i } }))))).map((r) => r.id);
  // Every attempt's lease is lost to another worker before its completion arrives.
  for (const id of ids) faults.loseLease(id);
  worker.wake();
  await clock.advance(1_000);

  const stale = events.entries.filter((e) => e.value.type === 'stale').map((e) => (e.value as Extract<WorkerEvent, { type: 'stale' }>).jobId);
  expect([...stale].sort()).toEqual([...ids].sort());
  const fenced = lines.filter((l) => typeof l.msg === 'string' && l.msg.includes('fenced out'));
  // The first completion is written alone (a lone completion never waits), the 29 that came
  // meanwhile in the next call. Was: a warning per completion, 30 lines.
  expect(fenced.map(({ level, msg, completions, jobIds }) => ({ level, msg, completions, jobIds }))).toEqual([
    { level: 40, msg: 'completions fenced out: their rows had moved on', completions: 1, jobIds: stale.slice(0, 1) },
    { level: 40, msg: 'completions fenced out: their rows had moved on', completions: N - 1, jobIds: stale.slice(1, 11) },
  ]);
  await clock.await(worker.stop());
});
