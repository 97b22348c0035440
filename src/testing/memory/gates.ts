/*
 * Gates: a lane, a concurrency key, a rate meter (docs/DESIGN.md, "Policies"; migration 0008).
 * How much room a gate has now, and the release of its parked rows in order.
 */
import { meterRoom } from './meter';
import { byClaimOrder, type GateKind, type MemoryJob, type Store, type Tx } from './state';

/** A refused row of a concurrency key is reconsidered after this (gate_room's next_at). */
export const BOUNCE_MS = 2_000;
/** A gate whose definition sets no limit releases its parked rows in chunks of this many. */
const UNLIMITED_RELEASE = 1_000;

/** The key a row is parked under at a gate of `kind`. */
export const gateKeyOf = (job: MemoryJob, kind: GateKind): string | null => (kind === 'rate' ? job.rateKey : kind === 'lane' ? job.lane : job.concurrencyKey);

/** A Ready row of a lane in its order: all but a schedule's armed fire not yet due, never claimed (docs/policies.md, "Lanes"; claim_jobs.sql). */
export const inLaneOrder = (job: MemoryJob, now: number): boolean => !(job.schedule !== null && job.execution === 0 && job.runAt > now);

/** The gate's parked rows, in the order they are released (jobs_parked_idx). */
function parkedAt(store: Store, namespace: string, kind: 'concurrency' | 'rate', key: string): MemoryJob[] {
  return store
    .jobsIn(namespace)
    .filter((p) => p.status === 'ready' && p.blockedBy === kind && gateKeyOf(p, kind) === key)
    .sort(byClaimOrder);
}

/** The first row parked at the gate, in release order (the claim's "not past a parked row"). */
export const firstParked = (store: Store, namespace: string, kind: 'concurrency' | 'rate', key: string): MemoryJob | undefined =>
  parkedAt(store, namespace, kind, key)[0];

/** acta.gate_room (sql/functions/gate_room.sql): room (null: no limit) and when a refused row is reconsidered. */
export function gateRoom(store: Store, tx: Tx, namespace: string, kind: 'concurrency' | 'rate', key: string, definition: string): { room: number | null; nextAt: number | null } {
  const d = store.definition(namespace, definition);
  if (kind === 'concurrency') {
    const limit = d?.concurrencyLimit ?? null;
    if (limit === null) return { room: null, nextAt: null };
    const held = store.jobsIn(namespace).filter((e) => e.concurrencyKey === key && e.status === 'executing').length;
    return { room: limit - held, nextAt: tx.now + BOUNCE_MS };
  }
  const gate = store.gate(namespace, 'rate', key);
  if (gate?.shutUntil != null && gate.shutUntil > tx.now) return { room: 0, nextAt: gate.shutUntil };
  const limit = d?.rateLimit ?? null;
  const perMs = d?.ratePerMs ?? 0;
  if (limit === null) return { room: null, nextAt: null };
  return meterRoom(store, namespace, key, limit, perMs, tx.now);
}

/** acta.release_gate (sql/functions/release_gate.sql): how many parked rows it released. */
export function releaseGate(store: Store, tx: Tx, namespace: string, kind: GateKind, key: string): number {
  const jobs = store.jobsIn(namespace);
  if (kind === 'lane') {
    if (jobs.some((h) => h.lane === key && (h.status === 'executing' || h.status === 'waiting'))) return 0;
    const head = jobs.find((r) => r.lane === key && r.status === 'ready' && inLaneOrder(r, tx.now));
    if (head?.blockedBy !== 'lane') return 0;
    head.blockedBy = null;
    return 1;
  }
  const parked = parkedAt(store, namespace, kind, key);
  let released = 0;
  let nextAt: number | null = null;
  if (parked.length > 0) {
    const room = gateRoom(store, tx, namespace, kind, key, parked[0].definition);
    nextAt = room.nextAt;
    for (const p of parked.slice(0, Math.max(room.room ?? UNLIMITED_RELEASE, 0))) {
      p.blockedBy = null;
      released++;
    }
  }
  if (parked.length > released) {
    store.upsertGate(namespace, kind, key).recheckAt = nextAt ?? tx.now + BOUNCE_MS;
  } else if (kind === 'concurrency') {
    store.deleteGate(namespace, kind, key);
  } else {
    const gate = store.gate(namespace, kind, key);
    if (gate) gate.recheckAt = null;
  }
  return released;
}

/**
 * acta.recheck_gates (sql/functions/recheck_gates.sql): after a policy change of `names`, the
 * concurrency keys and rate meters their rows are parked at are rechecked by the next claim.
 */
export function recheckGates(store: Store, tx: Tx, namespace: string, names: readonly string[]): void {
  let moved = false;
  for (const g of store.gatesIn(namespace)) {
    if (g.kind === 'lane' || g.recheckAt === null || g.recheckAt <= tx.now) continue;
    const kind = g.kind;
    if (!store.jobsIn(namespace).some((p) => p.status === 'ready' && p.blockedBy === kind && gateKeyOf(p, kind) === g.key && names.includes(p.definition))) continue;
    g.recheckAt = tx.now;
    moved = true;
  }
  if (moved) tx.notify(namespace);
}
