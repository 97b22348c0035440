/*
 * The claim with its admission (docs/DESIGN.md, "Policies"; docs/how-it-works.md, "Policies:
 * admission in the claim"): which rows a worker takes, which it parks, and the idle answer.
 */
import type { ClaimResult, ClaimedRow } from '../../db/types';
import type { ClaimArgs } from '../../ledger';
import { firstParked, gateRoom, inLaneOrder, releaseGate } from './gates';
import { recordStarts } from './meter';
import { claimedFire } from './schedules';
import { byClaimOrder, byDueOrder, copyJson, type GateKind, type MemoryDefinition, type MemoryJob, SqlStateError, type Store, type Tx } from './state';

/** At most this many rounds of candidates per claim. */
const MAX_ROUNDS = 4;
/** Gates whose recheck has come, released per claim. */
const RECHECKS_PER_CLAIM = 16;
/** Rows tagged with a fair turn per definition per claim. */
const FAIR_TAGS_PER_CLAIM = 100_000;
/** Rows parked per statement when a round is refused whole. */
const BULK_PARK_MAX = 10_000;

const keyed = (j: MemoryJob) => j.concurrencyKey !== null || j.rateKey !== null || j.lane !== null;
const byFairOrder = (a: MemoryJob, b: MemoryJob): number => b.priority - a.priority || (a.fairTag ?? 0) - (b.fairTag ?? 0) || a.id - b.id;

/** acta.claim_jobs (sql/functions/claim_jobs.sql): the claim, its admission and parking, or the idle answer. */
export function claimJobs(store: Store, tx: Tx, args: ClaimArgs): ClaimResult {
  const { namespace, workerId, definitions, limit, leaseMs } = args;
  // STRICT: a null argument claims nothing.
  if (namespace == null || workerId == null || definitions == null || limit == null || leaseMs == null) return { rows: [], nextDueInMs: null };
  if (limit < 1) throw new SqlStateError('22023', `acta.claim_jobs: p_limit must be at least 1, got ${limit}`);
  const now = tx.now;
  // Paused (acta.pauses): the whole namespace, or the definitions left out; nothing left: idle, no due time.
  const paused = store.pausesIn(namespace).map((p) => p.definition);
  const names = [...new Set(definitions)].filter((name) => !paused.includes(name));
  if (paused.includes('') || names.length === 0) return { rows: [], nextDueInMs: null };
  const fair = names.filter((name) => store.definition(namespace, name)?.fair === true);
  const plain = names.filter((name) => !fair.includes(name));
  const jobs = store.jobsIn(namespace);
  const isDue = (j: MemoryJob) => j.status === 'ready' && j.blockedBy === null && j.runAt <= now;
  let notify = false;

  // The rechecks that have come (claim_jobs.sql, before the pick).
  const rechecks = store
    .gatesIn(namespace)
    .filter((g) => g.recheckAt !== null && g.recheckAt <= now)
    .sort((a, b) => (a.recheckAt as number) - (b.recheckAt as number))
    .slice(0, RECHECKS_PER_CLAIM);
  for (const g of rechecks) {
    const still = store.gate(namespace, g.kind, g.key);
    if (still && still.recheckAt !== null && still.recheckAt <= now && releaseGate(store, tx, namespace, g.kind, g.key) > 0) notify = true;
  }

  if (fair.length > 0) tagFairTurns(store, namespace, fair, now);

  const seen = new Set<number>();
  const taken: ClaimedRow[] = [];
  const releases = new Map<string, { kind: GateKind; key: string }>();
  let want = limit;
  for (let round = 1; ; round++) {
    let ids: MemoryJob[] = [];
    let picked = 0;
    let walked: MemoryJob[] | null = null;
    if (plain.length > 0) {
      const pickable = (j: MemoryJob) => isDue(j) && j.fairTag === null && !seen.has(j.id);
      const firstDue = plain.flatMap((name) => jobs.filter((j) => j.definition === name && pickable(j)).sort(byDueOrder).slice(0, want));
      ids = firstDue.sort(byClaimOrder);
      picked = ids.length;
      if (picked >= want) {
        const maxPriority = Math.max(...ids.map((j) => j.priority));
        const samePriority = ids.every((j) => j.priority === maxPriority);
        const higherDue = jobs.some((j) => plain.includes(j.definition) && isDue(j) && j.fairTag === null && j.priority > maxPriority);
        if (samePriority && !higherDue) {
          ids = ids.slice(0, want);
        } else {
          walked = ids;
          ids = plain
            .flatMap((name) => jobs.filter((j) => j.definition === name && pickable(j)).sort(byClaimOrder).slice(0, want))
            .sort(byClaimOrder)
            .slice(0, want);
        }
      }
    }
    if (fair.length > 0) {
      const fairIds = fair.flatMap((name) => jobs.filter((j) => j.definition === name && j.status === 'ready' && j.blockedBy === null && j.fairTag !== null && !seen.has(j.id)).sort(byFairOrder).slice(0, want)).sort(byFairOrder);
      picked += fairIds.length;
      // Merged as claim_jobs.sql merges them (by priority, then position in each list).
      const ranked = [...ids.map((job, i) => ({ job, ord: i })), ...fairIds.map((job, i) => ({ job, ord: i }))];
      ids = ranked.sort((a, b) => b.job.priority - a.job.priority || a.ord - b.ord || a.job.id - b.job.id).slice(0, want).map((r) => r.job);
    }
    for (const j of ids) seen.add(j.id);
    // claim_jobs.sql's v_locked / v_locked_ids wakeup.
    if (picked > want || (walked !== null && walked.some((j) => !ids.includes(j)))) notify = true;
    if (ids.length === 0) break;

    const admitted = ids.some(keyed) ? admit(store, tx, namespace, names, ids, releases) : ids;
    for (const job of admitted) {
      job.status = 'executing';
      job.execution += 1;
      job.leaseHolder = workerId;
      job.leaseExpiresAt = now + leaseMs;
      job.claimedAt = now;
      job.started = false;
    }
    taken.push(...admitted.map((j) => claimedRow(store, j, now))); // in claim order, as the candidates came
    if (taken.length >= limit || picked < want || round >= MAX_ROUNDS) break;
    want = limit - taken.length;
  }

  // Every gate a row was parked on, released (claim_jobs.sql, after the rounds).
  for (const { kind, key } of releases.values()) {
    if (releaseGate(store, tx, namespace, kind, key) > 0) notify = true;
  }
  if (notify) tx.notify(namespace);
  if (taken.length > 0) return { rows: taken, nextDueInMs: null };
  return { rows: [], nextDueInMs: nextDueInMs(store, namespace, names, now) };
}

function claimedRow(store: Store, j: MemoryJob, now: number): ClaimedRow {
  const fire = claimedFire(store, j, now);
  return {
    ...(fire ? { schedule: fire } : {}),
    id: String(j.id),
    definition: j.definition,
    payload: copyJson(j.payload),
    execution: j.execution,
    attempts: j.attempts,
    maxAttempts: j.maxAttempts,
    unchargedReturns: j.unchargedReturns,
    priority: j.priority,
  };
}

/** The fair definitions' newly due rows take their turns (claim_jobs.sql, "Fair order"). */
function tagFairTurns(store: Store, namespace: string, fair: string[], now: number): void {
  const jobs = store.jobsIn(namespace);
  const due = fair.flatMap((name) =>
    jobs
      .filter((j) => j.definition === name && j.status === 'ready' && j.blockedBy === null && j.fairTag === null && j.runAt <= now)
      .sort(byDueOrder)
      .slice(0, FAIR_TAGS_PER_CLAIM),
  );
  const groups = new Map<string, MemoryJob[]>();
  for (const j of due) {
    const group = `${j.definition}\u0000${j.concurrencyKey ?? ''}\u0000${j.priority}`;
    groups.set(group, [...(groups.get(group) ?? []), j]);
  }
  // Every group's first turn from the rows as they were before this tagging.
  const firsts = [...groups.values()].map((rows) => {
    const { definition, priority } = rows[0];
    const fkey = rows[0].concurrencyKey ?? '';
    const tagged = jobs.filter((f) => f.definition === definition && f.status === 'ready' && f.fairTag !== null && f.priority === priority);
    const served = tagged.filter((f) => f.blockedBy === null).reduce((min, f) => Math.min(min, f.fairTag as number), Infinity);
    const last = tagged.filter((f) => (f.concurrencyKey ?? '') === fkey).reduce((max, f) => Math.max(max, f.fairTag as number), -Infinity);
    return { rows, first: Math.max(served === Infinity ? 0 : served, last === -Infinity ? 0 : last + 1) };
  });
  for (const { rows, first } of firsts) rows.sort(byDueOrder).forEach((j, n) => (j.fairTag = first + n));
}

interface Candidate {
  job: MemoryJob;
  ord: number;
  climit: number | null;
  rlimit: number | null;
  rper: number | null;
}

/** Comes `c` before the parked row `f` in claim order (none: yes)? */
const before = (f: MemoryJob | undefined, c: MemoryJob) =>
  f === undefined || f.priority < c.priority || (f.priority === c.priority && (f.runAt > c.runAt || (f.runAt === c.runAt && f.id > c.id)));

/**
 * One round's admission (claim_jobs.sql, the `verdict` query and the statements after it): the
 * admitted rows in claim order; the refused parked. Every verdict is taken on the rows as they
 * were when the round began, as one statement sees them.
 */
function admit(store: Store, tx: Tx, namespace: string, names: string[], ids: MemoryJob[], releases: Map<string, { kind: GateKind; key: string }>): MemoryJob[] {
  const jobs = store.jobsIn(namespace);
  const policyOf = (j: MemoryJob): MemoryDefinition | undefined => store.definition(namespace, j.definition);
  const cands: Candidate[] = ids.map((job, ord) => {
    const d = policyOf(job);
    return { job, ord, climit: d?.concurrencyLimit ?? null, rlimit: d?.rateLimit ?? null, rper: d?.ratePerMs ?? null };
  });

  // The lane (claim_jobs.sql: `l`). Its order is commit order (lane_seq, migration 0012); here
  // every enqueue commits as it is made, so commit order is id order.
  const laneOk = new Map<Candidate, boolean>();
  for (const c of cands) {
    const lane = c.job.lane;
    laneOk.set(
      c,
      lane === null ||
        (!jobs.some((h) => h.lane === lane && (h.status === 'executing' || h.status === 'waiting')) && !jobs.some((r) => r.lane === lane && r.status === 'ready' && r.id < c.job.id && inLaneOrder(r, tx.now))),
    );
  }

  // The key (`k`, `kq`, `kc`).
  const keyOk = new Map<Candidate, boolean>();
  const keyFits = fits(
    store,
    tx,
    namespace,
    'concurrency',
    cands.filter((c) => laneOk.get(c)),
    (c) => c.job.concurrencyKey,
    (c) => c.climit !== null,
    (c) => c.climit,
  );
  for (const c of cands) keyOk.set(c, laneOk.get(c) === true && (c.job.concurrencyKey === null || c.climit === null || keyFits.get(c) === true));

  // The meter (`m`, `mq`).
  const rateFits = fits(
    store,
    tx,
    namespace,
    'rate',
    cands.filter((c) => keyOk.get(c)),
    (c) => c.job.rateKey,
    () => true,
    (c) => c.rlimit,
  );
  const verdicts = cands.map((c) => {
    const verdict: GateKind | 'admitted' = !laneOk.get(c) ? 'lane' : !keyOk.get(c) ? 'concurrency' : c.job.rateKey === null || rateFits.get(c) === true ? 'admitted' : 'rate';
    return { c, verdict };
  });

  const admitted = verdicts.filter((v) => v.verdict === 'admitted').map((v) => v.c);
  const refused = verdicts.filter((v) => v.verdict !== 'admitted') as { c: Candidate; verdict: GateKind }[];
  const gates = new Map<string, { kind: GateKind; key: string }>();
  for (const { c, verdict } of refused) {
    const key = verdict === 'lane' ? c.job.lane : verdict === 'rate' ? c.job.rateKey : c.job.concurrencyKey;
    gates.set(`${verdict}\u0000${key}`, { kind: verdict, key: key as string });
  }
  for (const [k, g] of gates) releases.set(k, g);
  for (const { c, verdict } of refused) c.job.blockedBy = verdict;

  // A round refused whole: the bulk parking.
  if (admitted.length === 0 && refused.length > 0) {
    const keysOf = (kind: GateKind) => new Set([...gates.values()].filter((g) => g.kind === kind).map((g) => g.key));
    const parkAll = (kind: GateKind, rows: MemoryJob[]) => rows.slice(0, BULK_PARK_MAX).forEach((x) => (x.blockedBy = kind));
    const ckeys = keysOf('concurrency');
    parkAll(
      'concurrency',
      jobs.filter((x) => x.status === 'ready' && x.blockedBy === null && x.concurrencyKey !== null && ckeys.has(x.concurrencyKey) && x.runAt <= tx.now && names.includes(x.definition)),
    );
    const rkeys = keysOf('rate');
    parkAll(
      'rate',
      jobs.filter((x) => x.status === 'ready' && x.blockedBy === null && x.rateKey !== null && rkeys.has(x.rateKey) && x.runAt <= tx.now && names.includes(x.definition)),
    );
    const heads = new Map<string, number>();
    for (const lane of keysOf('lane')) {
      const head = jobs.find((f) => f.lane === lane && f.status === 'ready' && inLaneOrder(f, tx.now));
      if (head) heads.set(lane, head.id);
    }
    parkAll(
      'lane',
      jobs.filter((x) => x.status === 'ready' && x.blockedBy === null && x.lane !== null && inLaneOrder(x, tx.now) && heads.has(x.lane) && x.id > (heads.get(x.lane) as number)),
    );
  }

  // The meters' logs (acta.meter_starts).
  const starts = new Map<string, { n: number; perMs: number }>();
  for (const c of admitted) {
    if (c.job.rateKey === null || c.rlimit === null) continue;
    const s = starts.get(c.job.rateKey) ?? { n: 0, perMs: -Infinity };
    starts.set(c.job.rateKey, { n: s.n + 1, perMs: Math.max(s.perMs, c.rper ?? -Infinity) });
  }
  for (const [key, { n, perMs }] of starts) recordStarts(store, namespace, key, n, perMs, tx.now);
  return admitted.map((c) => c.job);
}

/**
 * Which candidates get a slot (or token) of their gate: per key, the room acta.gate_room gives for
 * the candidates' strictest definition (smallest limit, then first in claim order), handed out in
 * claim order to the candidates that come before the gate's first parked row.
 */
function fits(
  store: Store,
  tx: Tx,
  namespace: string,
  kind: 'concurrency' | 'rate',
  cands: Candidate[],
  keyOf: (c: Candidate) => string | null,
  limited: (c: Candidate) => boolean,
  limitOf: (c: Candidate) => number | null,
): Map<Candidate, boolean> {
  const strictest = new Map<string, Candidate>();
  for (const c of cands) {
    const key = keyOf(c);
    if (key === null || !limited(c)) continue;
    const s = strictest.get(key);
    // Ascending limit, nulls last (SQL's order), then claim order.
    const rank = (x: Candidate) => limitOf(x) ?? Infinity;
    if (!s || rank(c) < rank(s) || (rank(c) === rank(s) && c.ord < s.ord)) strictest.set(key, c);
  }
  const room = new Map<string, { room: number | null; first: MemoryJob | undefined }>();
  for (const [key, c] of strictest) room.set(key, { room: gateRoom(store, tx, namespace, kind, key, c.job.definition).room, first: firstParked(store, namespace, kind, key) });
  const taken = new Map<string, number>();
  const out = new Map<Candidate, boolean>();
  for (const c of cands) {
    const key = keyOf(c);
    const r = key === null ? undefined : room.get(key);
    if (key === null || r === undefined || !before(r.first, c.job)) continue;
    const n = (taken.get(key) ?? 0) + 1;
    taken.set(key, n);
    out.set(c, kind === 'rate' && r.room === null ? true : n <= (r.room as number));
  }
  return out;
}

/** The idle answer: ms until the next row of `names` is due or the namespace's next gate recheck (null: none). */
function nextDueInMs(store: Store, namespace: string, names: string[], now: number): number | null {
  let next = Infinity;
  for (const j of store.jobsIn(namespace)) {
    if (j.status === 'ready' && j.blockedBy === null && j.fairTag === null && j.runAt > now && names.includes(j.definition)) next = Math.min(next, j.runAt);
  }
  for (const g of store.gatesIn(namespace)) if (g.recheckAt !== null && g.recheckAt > now) next = Math.min(next, g.recheckAt);
  return next === Infinity ? null : next - now;
}
