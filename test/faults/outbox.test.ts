/**
 * sys.outbox with real worker processes on a real server (docs/outbox.md, "Fan-out: exactly once"):
 * three `acta worker --outbox` processes of test/fixtures/outbox-fault-jobs.js (two subscribers of
 * one topic) while events are published, a quarter of them in transactions that roll back, one
 * worker is killed -9 and replaced about every second, and the server restarts once. Read from the
 * ledger once the outbox is empty: each committed event made exactly one job per subscriber, with
 * the key `acta:outbox:<id in 19 digits>:<definition>`, each job succeeded, and nothing of a
 * rolled-back publish was ever fanned out.
 */
import { createClient } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import { sleep, spawnWorker, useFaultServer, type WorkerProcess, expectCleanExit } from './harness';
import { waitFor } from '../helpers/wait';

// H = 2 s: a lease (4 H = 8 s) outlasts the server restart below on a loaded machine; with 1 s a
// worker holding attempts could rightly give up and exit 1 (test/faults/restart.test.ts says the same).
const H = 2000;
const MODULE = 'test/fixtures/outbox-fault-jobs.js';
const SUBSCRIBERS = ['audit', 'relay'];
/** ACTA_OUTBOX_SCALE=full: 3,000 events over about a minute, with the same faults and checks. */
const FULL = process.env.ACTA_OUTBOX_SCALE === 'full';
const BATCHES = FULL ? 150 : 50;
const PER_BATCH = 20;
const BATCH_EVERY_MS = FULL ? 350 : 300;

const server = useFaultServer();

function startWorker(): WorkerProcess {
  const args = ['--outbox', '--heartbeat', String(H), '--executors', '8', '--shutdown-timeout', '1000'];
  return spawnWorker({ dbUrl: server.dbUrl, events: '/dev/null', module: MODULE, args, env: { ACTA_LOG_LEVEL: 'info' } });
}

const note = (what: string, figures: object) => {
  if (process.env.ACTA_FAULT_DEBUG) console.log(`${what}: ${JSON.stringify(figures)}`);
};

test('kill -9 every second and a server restart while events are published: each committed event one job per subscriber, each succeeded; rolled back: none; the outbox left empty', async () => {
  const workers = [startWorker(), startWorker(), startWorker()];
  await Promise.all(workers.map((w) => w.workerId()));
  const db = createPgDb({ connectionString: server.dbUrl, max: 2 });
  const client = createClient({ db, namespace: 'default' });

  /** Event ids of committed publishes; seqs of rolled-back ones; seqs whose commit failed (either outcome). */
  const committed = new Map<string, number>();
  const rolledBack = new Set<number>();
  const uncertain = new Set<number>();
  const counts = { killed: 0, restarts: 0, publishErrors: 0 };
  let publishing = true;

  const publisher = (async () => {
    // BATCHES, and on until the chaos below has killed 5 workers and restarted the server (a loaded
    // machine starts each new worker slower: test/faults/retention.test.ts does the same).
    for (let b = 0; b < BATCHES || ((counts.killed < 5 || counts.restarts < 1) && b < 4 * BATCHES); b++) {
      const seqs = Array.from({ length: PER_BATCH }, (_, i) => b * PER_BATCH + i);
      const items = seqs.map((seq) => ({ topic: 'fault.event', key: `k${seq % 7}`, message: { seq, ms: 20 } }));
      const rollBack = b % 4 === 3;
      try {
        const ids = await db.transaction(async (tx) => {
          const results = await client.publishMany(items, { tx });
          if (rollBack) throw new Error('roll back');
          return results.map((r) => r.id);
        });
        ids.forEach((id, i) => committed.set(id, seqs[i]));
      } catch (err) {
        if (rollBack && (err as Error).message === 'roll back') seqs.forEach((s) => rolledBack.add(s));
        else {
          counts.publishErrors++;
          seqs.forEach((s) => uncertain.add(s));
        }
      }
      await sleep(BATCH_EVERY_MS);
    }
    publishing = false;
  })();

  const chaosFrom = performance.now();
  const chaos = (async () => {
    for (let round = 1; publishing; round++) {
      await sleep(700 + Math.random() * 600);
      if (counts.restarts === 0 && performance.now() - chaosFrom > 4_000) {
        await server.stop();
        await sleep(1_000);
        await server.start();
        counts.restarts++;
        continue;
      }
      const i = Math.floor(Math.random() * workers.length);
      workers[i].kill('SIGKILL');
      await workers[i].exited;
      counts.killed++;
      workers[i] = startWorker();
      await workers[i].workerId();
    }
  })();

  await Promise.all([publisher, chaos]);
  await db.close();
  const subscriberJobs = () =>
    server.query<{ definition: string; event: string; seq: number; key: string; status: string }>(
      `select definition, payload ->> 'id' as event, (payload -> 'message' ->> 'seq')::int as seq, idempotency_key as key, status
       from acta.all_jobs where definition = any ($1)`,
      [SUBSCRIBERS],
    );
  await waitFor(
    async () => {
      const [{ n }] = await server.query<{ n: string }>('select count(*) as n from acta.outbox');
      const open = (await subscriberJobs()).filter((j) => j.status !== 'succeeded');
      return (Number(n) === 0 && open.length === 0) || undefined;
    },
    'the outbox to empty and every subscriber job to succeed',
    60_000,
    250,
  );

  const rows = await subscriberJobs();
  note('outbox under faults', { ...counts, committed: committed.size, rolledBack: rolledBack.size, uncertain: uncertain.size, jobs: rows.length });
  expect(counts.restarts).toBe(1);
  expect(counts.killed).toBeGreaterThanOrEqual(5);
  expect(committed.size).toBeGreaterThan(BATCHES * PER_BATCH * 0.5);
  expect(rolledBack.size).toBeGreaterThan(0);
  // No pair twice (its idempotency key is unique, so count the pairs themselves too).
  const pairs = new Map<string, number>();
  for (const r of rows) pairs.set(`${r.event}:${r.definition}`, (pairs.get(`${r.event}:${r.definition}`) ?? 0) + 1);
  expect([...pairs].filter(([, n]) => n > 1)).toEqual([]);
  for (const r of rows) {
    expect(r.key).toBe(`acta:outbox:${r.event.padStart(19, '0')}:${r.definition}`);
    expect(r.status).toBe('succeeded');
  }
  // Each committed event: one job per subscriber, carrying its message.
  const missing: string[] = [];
  for (const [event, seq] of committed) {
    for (const definition of SUBSCRIBERS) {
      const job = rows.find((r) => r.event === event && r.definition === definition);
      if (job?.seq !== seq) missing.push(`${event}:${definition}`);
    }
  }
  expect(missing).toEqual([]);
  // Nothing from a rolled-back publish; an uncertain commit fanned out whole or not at all.
  expect(rows.filter((r) => rolledBack.has(r.seq))).toEqual([]);
  const known = new Set([...committed.keys()]);
  expect(rows.filter((r) => !known.has(r.event) && !uncertain.has(r.seq))).toEqual([]);
  const uncertainBatches = new Map<number, number>();
  for (const r of rows) if (!known.has(r.event)) uncertainBatches.set(Math.floor(r.seq / PER_BATCH), (uncertainBatches.get(Math.floor(r.seq / PER_BATCH)) ?? 0) + 1);
  expect([...uncertainBatches.values()].filter((n) => n !== PER_BATCH * SUBSCRIBERS.length)).toEqual([]);
  expect(rows.length).toBe(pairs.size);

  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await expectCleanExit(w);
}, 150_000);
