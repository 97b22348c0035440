// A schedule's name is one schedule in the namespace (docs/schedules.md, "Declared schedules:
// reconciliation"): two services whose workers declare one name under different definitions share
// one schedule row, and the other definition's fires stop. createWorker refuses it within one
// worker; across workers, the worker that starts says so.
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

test("a worker that declares a schedule name another definition's schedule has in the namespace warns at its start, naming both; one that declares its own again is quiet", async () => {
  const namespace = `names-${randomUUID().slice(0, 8)}`;
  const billing = defineJob({ name: 'billing-report', handler: () => undefined, schedule: { name: 'nightly', cron: '0 2 * * *' } });
  const cleanup = defineJob({ name: 'cleanup', handler: () => undefined, schedule: { name: 'nightly', cron: '0 3 * * *' } });
  const started = async (d: ReturnType<typeof defineJob>) => {
    const lines: { msg: string; schedule?: string; definition?: string; storedDefinition?: string }[] = [];
    const logger = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
    const w = createWorker({ db, namespace, logger, listen: false, definitions: [d] });
    await w.start();
    return { w, said: lines.filter((l) => l.schedule !== undefined).map((l) => [l.schedule, l.definition, l.storedDefinition]) };
  };
  const a = await started(billing);
  expect(a.said).toEqual([]);
  const b = await started(cleanup); // another service's worker takes the name over
  expect(b.said).toEqual([['nightly', 'cleanup', 'billing-report']]);
  await a.w.stop();
  const again = await started(billing); // the first service restarts: its schedule is cleanup's
  expect(again.said).toEqual([['nightly', 'billing-report', 'cleanup']]);
  expect((await createClient({ db, namespace }).schedules.list('nightly')).map((s) => s.definition)).toEqual(['cleanup']);
  const own = await started(cleanup);
  expect(own.said).toEqual([]);
  for (const w of [b.w, again.w, own.w]) await w.stop();
});

test('one reconcile of both definitions that declare a name gives it to the newest declaration, not the first definition by name', async () => {
  const namespace = `names-${randomUUID().slice(0, 8)}`;
  const quiet = pino({ level: 'silent' });
  const billing = defineJob({ name: 'billing-report', handler: () => undefined, schedule: { name: 'nightly', cron: '0 2 * * *' } });
  const cleanup = defineJob({ name: 'cleanup', handler: () => undefined, schedule: { name: 'nightly', cron: '0 3 * * *' } });
  const start = async (definitions: ReturnType<typeof defineJob>[]) => {
    const w = createWorker({ db, namespace, logger: quiet, listen: false, definitions });
    await w.start();
    return w;
  };
  const owner = async () => (await createClient({ db, namespace }).schedules.list('nightly')).map((s) => s.definition);
  const a = await start([billing]);
  const b = await start([cleanup]); // declared last: cleanup's
  expect(await owner()).toEqual(['cleanup']);
  // A canary running both definitions without the schedule: its stop gives both policies back to
  // the older builds in one refresh, which reconciles both definitions at once.
  const canary = await start([defineJob({ name: 'billing-report', handler: () => undefined }), defineJob({ name: 'cleanup', handler: () => undefined })]);
  expect(await owner()).toEqual([]);
  await canary.stop();
  expect(await owner()).toEqual(['cleanup']);
  await a.stop();
  await b.stop();
});
