/**
 * Policies with real worker processes on a real server (docs/DESIGN.md, "Policies";
 * docs/policies.md): concurrency keys, rate meters, lanes and fair order hold for a fleet of
 * `acta worker` processes through kill -9, SIGSTOP past the lease, an immediate restart, batch
 * claims and a rolling deploy of two builds. Each rule is read from the attempt ledger
 * (test/faults/ledger.ts), once the attempts of interest have ended; test/db/policies.test.ts
 * holds the same rules call by call.
 */
import { createClient, type Definition } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import { type Attempt, laneBreaks, ledger, maxOverlap, maxStartsInWindow } from './ledger';
import { eventsFile, type FaultServer, readEvents, spawnWorker, useFaultServer, waitForStatus, type WorkerProcess, expectCleanExit } from './harness';
import { waitFor } from '../helpers/wait';

const H = 1000;
/** Lease 4 H, then the recovery pass (every 4 H) taken by the next heartbeat of a live worker (src/config.ts, leaseClock). */
const LEASE_MS = 4 * H;
const RECOVERY_INTERVAL_MS = 4 * H;
const MODULE = 'test/fixtures/policy-jobs.js';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { definitions } = require('../fixtures/policy-jobs.js') as { definitions: Definition[] };

const server = useFaultServer();

/** `acta worker` processes of the fixture in namespace `ns`, running only `run` (POLICY_DEFINITIONS). */
function startWorkers(n: number, ns: string, events: string, run: string, options: { executors?: number; env?: Record<string, string>; build?: string; heartbeatMs?: number } = {}): WorkerProcess[] {
  const args = ['--namespace', ns, '--heartbeat', String(options.heartbeatMs ?? H), '--executors', String(options.executors ?? 4), '--shutdown-timeout', '1000'];
  if (options.build !== undefined) args.push('--build', options.build);
  return Array.from({ length: n }, () => spawnWorker({ dbUrl: server.dbUrl, events, module: MODULE, args, env: { POLICY_DEFINITIONS: run, ...options.env } }));
}

/** Enqueues the items in one call, their keys computed by the fixture's definitions; returns the ids in order. */
async function enqueue(ns: string, definition: string, payloads: object[]): Promise<string[]> {
  const db = createPgDb({ connectionString: server.dbUrl, max: 1 });
  try {
    const client = createClient({ force: true, db, namespace: ns, definitions });
    return (await client.enqueueMany(payloads.map((payload) => ({ definition, payload })))).map((r) => r.id);
  } finally {
    await db.close();
  }
}

/** SIGTERM, then the exits: each worker stops gracefully (exit 0), its attempts ended in the ledger. */
async function stopAll(workers: WorkerProcess[]): Promise<void> {
  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await expectCleanExit(w);
}

/** The database clock now, ms (the ledger's clock). */
async function dbNow(s: FaultServer): Promise<number> {
  return (await s.query<{ now: number }>('select (extract(epoch from clock_timestamp()) * 1000)::float8 as now'))[0].now;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const ofKey = (attempts: Attempt[], key: string) => attempts.filter((a) => a.concurrencyKey === key);
/** Figures for the commit message and the report (ACTA_FAULT_DEBUG=1). */
const note = (what: string, figures: object) => {
  if (process.env.ACTA_FAULT_DEBUG) console.log(`${what}: ${JSON.stringify(figures)}`);
};

test('a concurrency key shared by three worker processes: never more attempts of it at once than its limit; another key is not held back', async () => {
  const ns = 'key-limit';
  const events = eventsFile();
  const workers = startWorkers(3, ns, events, 'keyed'); // limit 2, 12 executors in all
  await Promise.all(workers.map((w) => w.workerId()));
  // One call, b's rows behind a's: two calls let a's rows run while a loaded run opened the second.
  const ab = await enqueue(ns, 'keyed', [...range(30).map((i) => ({ key: 'a', i, ms: 100 })), ...range(6).map((i) => ({ key: 'b', i, ms: 100 }))]);
  const [a, b] = [ab.slice(0, 30), ab.slice(30)];
  await waitForStatus(server, [...a, ...b], 'succeeded', 'the jobs of both keys to succeed');
  await stopAll(workers);

  const attempts = await ledger(server, ns);
  const overlapA = maxOverlap(ofKey(attempts, 'a'));
  const overlapB = maxOverlap(ofKey(attempts, 'b'));
  expect(overlapA.max).toBe(2);
  expect(overlapB.max).toBe(2);
  // b's rows were enqueued behind a's backlog, which waits parked: b ran beside a, all of b's
  // attempts claimed before half of a's were.
  const aStarts = ofKey(attempts, 'a').map((x) => x.claimedAt).sort((x, y) => x - y);
  const lastB = Math.max(...ofKey(attempts, 'b').map((x) => x.claimedAt));
  expect(lastB).toBeLessThan(aStarts[14]);
  const byWorker = new Set(ofKey(attempts, 'a').map((x) => x.workerId));
  expect(byWorker.size).toBeGreaterThanOrEqual(2);
  note('key limit 2, 3 workers', { overlapA, overlapB, aClaimedBeforeLastB: aStarts.filter((t) => t < lastB).length, workers: byWorker.size, attempts: attempts.length });
});

test('kill -9 of a key\'s holder (limit 1): the slot comes back when recovery returns the attempt, within lease + recovery interval, and never two attempts of the key at once', async () => {
  const ns = 'key-kill';
  const events = eventsFile();
  const workers = startWorkers(3, ns, events, 'keyed', { executors: 2, env: { POLICY_CONCURRENCY_LIMIT: '1' } });
  const ids = await Promise.all(workers.map((w) => w.workerId()));
  // The first job's first attempt hangs; the others wait for the key, parked.
  const jobIds = await enqueue(ns, 'keyed', [{ key: 'k', slowOnExecution: 1, ms: 100 }, ...range(3).map(() => ({ key: 'k', ms: 100 }))]);
  const start = await waitFor(() => readEvents(events).find((e) => e.event === 'start' && e.jobId === jobIds[0]), 'the first job to start');
  await waitFor(async () => (await server.query<{ started: boolean }>('select started from acta.jobs where id = $1', [jobIds[0]]))[0].started, 'its start to be reported by a heartbeat', 10 * H);
  const holder = workers.find((w) => w.pid === start.pid)!;
  const holderId = ids[workers.indexOf(holder)];
  const killedAt = await dbNow(server);
  holder.kill('SIGKILL');
  await holder.exited;

  await waitForStatus(server, jobIds, 'succeeded', 'the key\'s jobs to succeed on the other workers');
  await stopAll(workers.filter((w) => w !== holder));
  const attempts = ofKey(await ledger(server, ns), 'k');
  const lost = attempts.find((a) => a.jobId === jobIds[0] && a.execution === 1)!;
  expect(lost).toMatchObject({ workerId: holderId, outcome: 'lost', charged: true });
  // The slot was held by the dead attempt until recovery returned it: at the latest the lease
  // after the last renewal (before the kill), then the next recovery pass, which the first
  // heartbeat of a live worker after it is due takes (≤ H later).
  const heldAfterKill = lost.finishedAt - killedAt;
  expect(heldAfterKill).toBeLessThanOrEqual(LEASE_MS + RECOVERY_INTERVAL_MS + H);
  // The key's next attempt started only after that return, and never two at once. (Claims that
  // run at once may admit a later job of the key first: one may run before the hung one.)
  const after = attempts.filter((a) => a.claimedAt > lost.claimedAt);
  const firstAfter = Math.min(...after.map((a) => a.claimedAt));
  expect(firstAfter).toBeGreaterThanOrEqual(lost.finishedAt);
  const overlap = maxOverlap(attempts);
  expect(overlap.max).toBe(1);
  expect(after.every((a) => a.workerId !== holderId)).toBe(true);
  note('kill -9 of the holder, limit 1', { heldAfterKillMs: Math.round(heldAfterKill), nextClaimAfterReturnMs: +(firstAfter - lost.finishedAt).toFixed(3), overlap });
});

test('SIGSTOP of a key\'s holder past its lease, then SIGCONT: the woken worker can neither free the slot another attempt holds now nor complete for it', async () => {
  const ns = 'key-stall';
  const events = eventsFile();
  const env = { POLICY_CONCURRENCY_LIMIT: '1' };
  const [a] = startWorkers(1, ns, events, 'keyed', { executors: 2, env });
  const aId = await a.workerId();
  // The first job hangs in A; the key's attempts in B take 2 s each, while A wakes up.
  const jobIds = await enqueue(ns, 'keyed', [{ key: 'k', slowOnExecution: 1, ms: 2_000 }, { key: 'k', ms: 2_000 }, { key: 'k', ms: 100 }]);
  await waitFor(() => readEvents(events).some((e) => e.event === 'start' && e.jobId === jobIds[0] && e.pid === a.pid), 'the first job to start in A');
  await waitFor(async () => (await server.query<{ started: boolean }>('select started from acta.jobs where id = $1', [jobIds[0]]))[0].started, 'its start to be reported by a heartbeat', 10 * H);
  const [b] = startWorkers(1, ns, events, 'keyed', { executors: 2, env });
  const bId = await b.workerId();

  a.kill('SIGSTOP');
  try {
    // Recovery returns A's attempt; B runs the key's next attempt (the returned job is due again
    // at its return, so the key's parked job, older, may go first).
    await waitFor(() => readEvents(events).some((e) => e.event === 'start' && e.pid === b.pid), 'an attempt of the key to start in B', 20 * H);
    a.kill('SIGCONT');
    // A's handler is aborted (its deadline passed) and the completion it writes is fenced out.
    // (One line per written batch, naming its jobs: test/faults/fencedLog.spec.ts.)
    const fenced = await a.waitForLog('completions fenced out', 10 * H, (l) => Array.isArray(l.jobIds) && l.jobIds.includes(jobIds[0]));
    await waitForStatus(server, jobIds, 'succeeded', 'the key\'s jobs to succeed');
    await stopAll([a, b]);

    const attempts = ofKey(await ledger(server, ns), 'k');
    const lost = attempts.find((x) => x.jobId === jobIds[0] && x.execution === 1)!;
    expect(lost).toMatchObject({ workerId: aId, outcome: 'lost' });
    // A woke while an attempt of B held the key's only slot (A's fenced write came inside it) ...
    const fencedAt = Number(fenced.time);
    const holding = attempts.find((x) => x.workerId === bId && x.claimedAt <= fencedAt && fencedAt < x.finishedAt);
    expect(holding).toBeDefined();
    expect(holding!.claimedAt).toBeGreaterThanOrEqual(lost.finishedAt);
    // ... and freed nothing: the key's next attempt started after B's ended, never two at once.
    const next = attempts.filter((x) => x.claimedAt > holding!.claimedAt);
    expect(Math.min(...next.map((x) => x.claimedAt))).toBeGreaterThanOrEqual(holding!.finishedAt);
    const overlap = maxOverlap(attempts);
    expect(overlap.max).toBe(1);
    // Nor completed for it: the stalled attempt's one ledger row is its loss, and the job's result
    // is a later attempt's (B's, or A's own once it resumed as a healthy worker and claimed again).
    const [row] = await server.query<{ result: { pid: number; execution: number } }>('select result from acta.all_jobs where id = $1', [jobIds[0]]);
    expect(row.result.execution).toBeGreaterThan(1);
    expect(attempts.filter((x) => x.jobId === jobIds[0] && x.execution === 1)).toEqual([lost]);
    note('SIGSTOP of the holder, limit 1', { fencedInsideBAttemptMs: [Math.round(fencedAt - holding!.claimedAt), Math.round(holding!.finishedAt - fencedAt)], overlap });
  } finally {
    a.kill('SIGCONT');
  }
});

test('a worker restarted at once after kill -9 honours the key\'s limit from its first claim: the dead attempts hold their slots until recovery returns them', async () => {
  const ns = 'key-restart';
  const events = eventsFile();
  // H = 3 s (lease 12 s): the restarted process starts and claims well before recovery returns
  // the dead attempts, however slowly a loaded run starts it.
  const [a] = startWorkers(1, ns, events, 'keyed', { heartbeatMs: 3 * H }); // limit 2
  const aId = await a.workerId();
  const jobIds = await enqueue(ns, 'keyed', [...range(2).map(() => ({ key: 'k', slowOnExecution: 1, ms: 100 })), ...range(4).map(() => ({ key: 'k', ms: 100 }))]);
  await waitFor(() => readEvents(events).filter((e) => e.event === 'start' && e.pid === a.pid).length === 2, 'two attempts of the key to start in A');
  await waitFor(async () => (await server.query<{ n: number }>('select count(*)::int as n from acta.jobs where id = any($1) and started', [jobIds]))[0].n === 2, 'their starts to be reported', 10 * H);
  a.kill('SIGKILL');
  await a.exited;
  const [a2] = startWorkers(1, ns, events, 'keyed', { heartbeatMs: 3 * H });
  const a2Id = await a2.workerId();
  // Another key's job: A2 claims at once, while the key's slots are still the dead attempts'.
  const [other] = await enqueue(ns, 'keyed', [{ key: 'other', ms: 100 }]);
  await waitForStatus(server, [...jobIds, other], 'succeeded', 'every job to succeed in the restarted worker', 60 * H);
  await stopAll([a2]);

  const attempts = await ledger(server, ns);
  const k = ofKey(attempts, 'k');
  const lost = k.filter((x) => x.workerId === aId && x.outcome !== 'succeeded');
  expect(lost.map((x) => x.outcome)).toEqual(['lost', 'lost']);
  const returned = Math.max(...lost.map((x) => x.finishedAt));
  const otherAttempt = attempts.find((x) => x.jobId === other)!;
  expect(otherAttempt.workerId).toBe(a2Id);
  expect(otherAttempt.claimedAt).toBeLessThan(Math.min(...lost.map((x) => x.finishedAt)));
  // Every attempt of the key by A2 came after the dead ones were returned; never more than 2.
  const byA2 = k.filter((x) => x.workerId === a2Id);
  expect(byA2).toHaveLength(6);
  expect(Math.min(...byA2.map((x) => x.claimedAt))).toBeGreaterThanOrEqual(Math.min(...lost.map((x) => x.finishedAt)));
  const overlap = maxOverlap(k);
  expect(overlap.max).toBe(2);
  note('restart at once, limit 2', { otherClaimedBeforeReturnMs: Math.round(returned - otherAttempt.claimedAt), overlap });
});

test('batch claims: one worker with 32 executors and 200 jobs of one key at limit 3 never runs more than 3 at once, and finishes them all', async () => {
  const ns = 'key-batch';
  const events = eventsFile();
  const [w] = startWorkers(1, ns, events, 'keyed', { executors: 32, env: { POLICY_CONCURRENCY_LIMIT: '3' } });
  await w.workerId();
  const jobIds = await enqueue(ns, 'keyed', range(200).map((i) => ({ key: 'k', i, ms: 20 })));
  await waitForStatus(server, jobIds, 'succeeded', 'the 200 jobs to succeed', 60_000);
  await stopAll([w]);

  const attempts = await ledger(server, ns);
  expect(attempts.filter((x) => x.outcome === 'succeeded')).toHaveLength(200);
  const overlap = maxOverlap(attempts);
  expect(overlap.max).toBe(3);
  // One claim stamps its rows alike: no claim started more than 3, though each asked for up to 32.
  const perClaim = new Map<number, number>();
  for (const x of attempts) perClaim.set(x.claimedAt, (perClaim.get(x.claimedAt) ?? 0) + 1);
  const largestClaim = Math.max(...perClaim.values());
  expect(largestClaim).toBe(3);
  note('batch claims, limit 3, 32 executors', { overlap, largestClaim, claims: perClaim.size, attempts: attempts.length });
});

test('a rate meter shared by three worker processes: no window of 1,000 ms holds more than 5 starts; ctx.rateLimited in one process holds it shut for all three', async () => {
  const ns = 'rate';
  const events = eventsFile();
  const workers = startWorkers(3, ns, events, 'metered'); // 5 starts per 1,000 ms
  await Promise.all(workers.map((w) => w.workerId()));
  // The first job calls ctx.rateLimited 300 ms into its first attempt: the burst's first 5 starts
  // used the window, so nothing else starts around that call, and the meter then stays shut
  // until 1,500 ms after it, past the window's next free token.
  const retryAfterMs = 1_500;
  const jobIds = await enqueue(ns, 'metered', range(20).map((i) => (i === 0 ? { key: 'r', i, ms: 300, rateLimitedOnExecution: 1, retryAfterMs } : { key: 'r', i, ms: 20 })));
  await waitForStatus(server, jobIds, 'succeeded', 'the burst to succeed', 60_000);
  await stopAll(workers);

  const attempts = (await ledger(server, ns)).filter((x) => x.rateKey === 'r');
  const window = maxStartsInWindow(attempts.map((x) => x.claimedAt), 1_000);
  expect(window.max).toBe(5);
  const limited = attempts.filter((x) => x.outcome === 'rate_limited');
  expect(limited).toHaveLength(1);
  expect(limited[0]).toMatchObject({ jobId: jobIds[0], charged: false });
  // Shut from the rate-limited attempt's end until its retry delay passed: no start of the key,
  // from any of the three processes.
  const shut = { from: limited[0].finishedAt, to: limited[0].finishedAt + retryAfterMs };
  expect(attempts.filter((x) => x.claimedAt >= shut.from && x.claimedAt < shut.to)).toEqual([]);
  expect(attempts.filter((x) => x.claimedAt >= shut.to).length).toBeGreaterThan(0);
  const [job] = await server.query<{ attempts: number }>('select attempts from acta.all_jobs where id = $1', [jobIds[0]]);
  expect(job.attempts).toBe(1); // its rate-limited attempt was not charged
  const byWorker = new Set(attempts.map((x) => x.workerId));
  expect(byWorker.size).toBeGreaterThanOrEqual(2);
  const firstAfterShut = Math.min(...attempts.filter((x) => x.claimedAt >= shut.to).map((x) => x.claimedAt));
  note('rate 5 per 1,000 ms, 3 workers', { window, workers: byWorker.size, firstStartAfterShutMs: Math.round(firstAfterShut - shut.to), attempts: attempts.length });
});

test('lanes under retries and a kill -9 of a head\'s holder: each lane ran one at a time in enqueue order, a retrying head kept its lane waiting, and no lane was stranded', async () => {
  const ns = 'lanes';
  const events = eventsFile();
  const workers = startWorkers(3, ns, events, 'laned');
  const ids = await Promise.all(workers.map((w) => w.workerId()));
  // 4 lanes of 5 jobs, enqueued interleaved. Each lane's second job fails its first attempt
  // (retried after 300 ms), lane 2's fourth too; lane 0's head hangs in its first attempt.
  const payloads = range(5).flatMap((i) => range(4).map((l) => ({ lane: `L${l}`, i, ms: 50, ...(i === 1 || (l === 2 && i === 3) ? { failOnAttempt: 1 } : {}), ...(l === 0 && i === 0 ? { slowOnExecution: 1 } : {}) })));
  const jobIds = await enqueue(ns, 'laned', payloads);
  const head = jobIds[0];
  const start = await waitFor(() => readEvents(events).find((e) => e.event === 'start' && e.jobId === head), 'lane 0\'s head to start');
  await waitFor(async () => (await server.query<{ started: boolean }>('select started from acta.jobs where id = $1', [head]))[0].started, 'its start to be reported', 10 * H);
  const holder = workers.find((w) => w.pid === start.pid)!;
  holder.kill('SIGKILL');
  await holder.exited;
  await waitForStatus(server, jobIds, 'succeeded', 'every lane to finish', 45_000);
  await stopAll(workers.filter((w) => w !== holder));

  const attempts = await ledger(server, ns);
  expect(laneBreaks(attempts)).toEqual([]);
  // Lane 0's head was returned by recovery and ran again before anything else of its lane.
  const lane0 = attempts.filter((x) => x.lane === 'L0');
  expect(lane0[0]).toMatchObject({ jobId: head, execution: 1, outcome: 'lost', workerId: ids[workers.indexOf(holder)] });
  expect(lane0[1]).toMatchObject({ jobId: head, execution: 2, outcome: 'succeeded' });
  // Each job that failed first waited out its back-off as its lane's head: its lane ran nothing meanwhile.
  const failed = attempts.filter((x) => x.outcome === 'failed');
  expect(failed).toHaveLength(5);
  for (const f of failed) {
    const laneAttempts = attempts.filter((x) => x.lane === f.lane);
    const next = laneAttempts[laneAttempts.indexOf(f) + 1];
    expect(next.jobId).toBe(f.jobId);
    // The back-off (300 ms) counts from the start of the completion call that recorded the failure,
    // which came after the handler's 50 ms: so at least 300 ms after the failed attempt's claim. Not
    // from the ledger's finishedAt: that is read once the call holds its rows
    // (docs/decisions/2026-12-05-ledger-times.md), up to 63 ms after its start in a loaded CI.
    expect(next.claimedAt - f.claimedAt).toBeGreaterThanOrEqual(300);
  }
  note('lanes', { attempts: attempts.length, lost: attempts.filter((x) => x.outcome.startsWith('lost')).length, failed: failed.length });
});

test('fair order: a tenant\'s job enqueued behind another tenant\'s 2,000 is claimed within about one claim per worker; the busy tenant alone takes every executor', async () => {
  const ns = 'fair';
  const events = eventsFile();
  const W = 2;
  const N = 8;
  const workers = startWorkers(W, ns, events, 'fair', { executors: N });
  await Promise.all(workers.map((w) => w.workerId()));
  // The first W x N take 2 s: every worker's first claim comes before any of them ends, however
  // late a loaded run wakes the second worker.
  const burst = await enqueue(ns, 'fair', range(2_000).map((i) => ({ tenant: 'A', i, ms: i < W * N ? 2_000 : 200 })));
  await waitFor(async () => (await server.query<{ n: number }>(`select count(*)::int as n from acta.all_jobs where namespace = $1 and status = 'succeeded'`, [ns]))[0].n >= 100, 'A to run 100 jobs', 30_000, 50);
  const [lone] = await enqueue(ns, 'fair', [{ tenant: 'B', ms: 200 }]);
  const visibleAt = await dbNow(server); // B's enqueue has committed: every claim from now on sees it
  await waitForStatus(server, [lone], 'succeeded', 'B\'s job to succeed');
  await stopAll(workers);

  const attempts = await ledger(server, ns);
  const b = attempts.find((x) => x.jobId === lone)!;
  const ofA = attempts.filter((x) => x.payload.tenant === 'A');
  // A's attempts claimed after B was visible and before B: by claims that did not take B, each of
  // at most N rows (a worker's free permits), one at a time per worker: the one in flight when B
  // became visible, and one beside the claim that gave B its turn (B's row locked meanwhile).
  // The claim that took B took at most one of A's rows before it (the one turn B shares).
  const aBetween = ofA.filter((x) => x.claimedAt > visibleAt && x.claimedAt < b.claimedAt);
  expect(aBetween.length).toBeLessThanOrEqual(2 * W * N);
  // In due order B would have waited for every row of A's then still waiting.
  const aWaiting = burst.length - ofA.filter((x) => x.claimedAt <= b.claimedAt && x.execution === 1).length;
  expect(aWaiting).toBeGreaterThan(1_000);
  // A alone: each worker took its N executors' worth, and none sat idle at the start while the
  // burst waited (each began on it before the first of A's attempts ended).
  const firstEnd = Math.min(...ofA.map((x) => x.finishedAt));
  for (const w of new Set(ofA.map((x) => x.workerId))) {
    const mine = ofA.filter((x) => x.workerId === w && x.claimedAt < b.createdAt);
    expect(maxOverlap(mine).max).toBeGreaterThanOrEqual(N);
    expect(Math.min(...mine.map((x) => x.claimedAt))).toBeLessThan(firstEnd);
  }
  expect(new Set(ofA.map((x) => x.workerId)).size).toBe(W);
  note('fair order', { aClaimedBetween: aBetween.length, aClaimedSinceCreated: ofA.filter((x) => x.claimedAt > b.createdAt && x.claimedAt < b.claimedAt).length, bound: 2 * W * N, aWaitingAtB: aWaiting, bWaitedMs: Math.round(b.claimedAt - visibleAt), firstClaimsBeforeFirstEndMs: [...new Set(ofA.map((x) => x.workerId))].map((w) => Math.round(firstEnd - Math.min(...ofA.filter((x) => x.workerId === w).map((x) => x.claimedAt)))) });
});

test('a rolling deploy of two builds declaring limits 2 and 4 for one key: while both are live at most 2 at once; once the old build stopped, up to 4 and never more', async () => {
  const ns = 'deploy';
  const events = eventsFile();
  const oldBuild = startWorkers(2, ns, events, 'keyed', { build: 'b1', env: { POLICY_CONCURRENCY_LIMIT: '2' } });
  const oldIds = await Promise.all(oldBuild.map((w) => w.workerId()));
  const newBuild = startWorkers(2, ns, events, 'keyed', { build: 'b2', env: { POLICY_CONCURRENCY_LIMIT: '4' } });
  const newIds = await Promise.all(newBuild.map((w) => w.workerId()));
  const policy = async () => (await server.query<{ concurrency_limit: number; build: string }>(`select concurrency_limit, build from acta.definitions where namespace = $1 and name = 'keyed'`, [ns]))[0];
  // The newest declaration is b2's, the limit the strictest: b1's.
  expect(await policy()).toEqual({ concurrency_limit: 2, build: 'b2' });
  // Jobs for both builds, then, once b1 has stopped, for b2 alone (each phase's own, so how fast
  // the processes start does not decide which phase runs them).
  const both = await enqueue(ns, 'keyed', range(40).map((i) => ({ key: 'd', i, ms: 100 })));
  await waitFor(async () => (await server.query<{ n: number }>(`select count(*)::int as n from acta.all_jobs where id = any($1) and status = 'succeeded'`, [both]))[0].n >= 24, 'both builds to run 24 jobs', 30_000, 50);
  await stopAll(oldBuild);
  expect(await policy()).toEqual({ concurrency_limit: 4, build: 'b2' });
  const alone = await enqueue(ns, 'keyed', range(40).map((i) => ({ key: 'd', i: 100 + i, ms: 100 })));
  await waitForStatus(server, [...both, ...alone], 'succeeded', 'the new build to finish the jobs', 60_000);
  await stopAll(newBuild);

  const workerRows = await server.query<{ id: string; build: string; started_at: number; stopped_at: number }>(
    `select id::text, build, (extract(epoch from started_at) * 1000)::float8 as started_at, (extract(epoch from stopped_at) * 1000)::float8 as stopped_at
       from acta.workers where namespace = $1`,
    [ns],
  );
  const buildOf = new Map(workerRows.map((r) => [r.id, r.build]));
  expect([...oldIds, ...newIds].map((id) => buildOf.get(id))).toEqual(['b1', 'b1', 'b2', 'b2']);
  const bothLive = { from: Math.max(...workerRows.filter((r) => r.build === 'b2').map((r) => r.started_at)), to: Math.max(...workerRows.filter((r) => r.build === 'b1').map((r) => r.stopped_at)) };

  const attempts = await ledger(server, ns);
  // While both builds were live: at most 2 at once, and reached.
  const whileOld = maxOverlap(attempts, { to: bothLive.to });
  expect(whileOld.max).toBe(2);
  // Both builds did take the key's attempts then.
  const during = attempts.filter((x) => x.claimedAt >= bothLive.from && x.claimedAt < bothLive.to);
  expect(new Set(during.map((x) => buildOf.get(x.workerId!)))).toEqual(new Set(['b1', 'b2']));
  // b2 alone: its own limit, reached and never passed.
  const afterOld = maxOverlap(attempts, { from: bothLive.to });
  expect(afterOld.max).toBe(4);
  expect(maxOverlap(attempts).max).toBe(4);
  note('rolling deploy 2 -> 4', { whileOld, afterOld, duringBothLive: during.length, bothLiveMs: Math.round(bothLive.to - bothLive.from) });
});
