/*
 * Workers, their heartbeat and passes, and the policies they declare (docs/DESIGN.md, "The lease
 * clock" and "Policies"; migrations 0004, 0007, 0008).
 */
import { recheckGates } from './gates';
import { releaseWaits } from './workflows';
import { reconcileSchedules } from './schedules';
import type { DeclaredPolicy, HeartbeatResult, PassSchedule } from '../../db/types';
import type { AppliedPolicy } from '../../db/workers';
import type { HeartbeatArgs, RegisterArgs } from '../../ledger';
import { copyJson, jobIdOf, SqlStateError, type Store, type Tx } from './state';

/** The passes a worker runs when none are named: recovery, every lease (src/db/workers.ts). */
const passesOf = (args: { passes?: PassSchedule[]; leaseMs: number }): PassSchedule[] => args.passes ?? [{ name: 'recovery', intervalMs: args.leaseMs }];

/** acta.register_worker (sql/functions/register_worker.sql): the worker's first beat; a repeat takes no pass. */
export function registerWorker(store: Store, tx: Tx, args: RegisterArgs): { duePasses: string[] } {
  const passes = passesOf(args);
  if (!store.namespaces.has(args.namespace)) store.namespaces.set(args.namespace, { name: args.namespace, createdAt: tx.now, policyVersion: 0 });
  const repeat = store.workers.has(args.workerId);
  if (!repeat) {
    store.workers.set(args.workerId, {
      id: args.workerId,
      namespace: args.namespace,
      hostname: args.hostname,
      pid: args.pid,
      definitions: [...args.definitions],
      maxAttempts: args.maxAttempts ? [...args.maxAttempts] : args.definitions.map(() => null),
      build: args.build ?? null,
      policies: args.policies ? copyJson(args.policies) : null,
      status: 'alive',
      startedAt: tx.now,
      lastHeartbeatAt: tx.now,
      stoppedAt: null,
    });
  }
  for (const name of [...args.definitions].sort()) store.ensureDefinition(args.namespace, name, tx.now);
  const changed = refreshDefinitions(store, tx, args.namespace, args.definitions);
  const duePasses = repeat ? passes.map((p) => p.name) : takePasses(store, tx, args.namespace, passes);
  if (changed) recheckGates(store, tx, args.namespace, args.definitions);
  return { duePasses };
}

/** Canonical JSON, so that two policies compare as jsonb does (key order aside). */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));

/** acta.refresh_definitions (sql/functions/refresh_definitions.sql): the policies the live workers' declarations give; whether one changed. */
export function refreshDefinitions(store: Store, tx: Tx, namespace: string, names: string[]): boolean {
  const live: { name: string; maxAttempts: number | null; startedAt: number; build: string | null; policy: DeclaredPolicy | null; seq: number }[] = [];
  let seq = 0;
  for (const w of store.workers.values()) {
    seq++;
    if (w.namespace !== namespace || w.status !== 'alive' || w.maxAttempts === null) continue;
    const n = Math.max(w.definitions.length, w.maxAttempts.length);
    for (let i = 0; i < n; i++) {
      const name = w.definitions[i];
      if (name === undefined || !names.includes(name)) continue;
      live.push({ name, maxAttempts: w.maxAttempts[i] ?? null, startedAt: w.startedAt, build: w.build, policy: w.policies?.[name] ?? null, seq });
    }
  }
  let changed = 0;
  const wasFair = names.filter((name) => store.definition(namespace, name)?.fair === true);
  for (const name of [...new Set(live.map((l) => l.name))].sort()) {
    const declared = live.filter((l) => l.name === name);
    // The newest declaration (started last; one instant: registered last).
    const newest = declared.reduce((a, b) => (b.startedAt > a.startedAt || (b.startedAt === a.startedAt && b.seq > a.seq) ? b : a));
    const limits = declared.map((l) => l.policy?.concurrency?.limit).filter((x): x is number => typeof x === 'number');
    // The smallest limit over the longest window: within every declared window (acta.refresh_definitions).
    const rates = declared.map((l) => l.policy?.rate).filter((r): r is { limit: number; perMs: number } => r !== null && typeof r === 'object');
    const next = {
      maxAttempts: newest.maxAttempts,
      timeoutMs: newest.policy?.timeoutMs ?? null,
      concurrencyLimit: limits.length > 0 ? Math.min(...limits) : null,
      rateLimit: rates.length > 0 ? Math.min(...rates.map((r) => r.limit)) : null,
      ratePerMs: rates.length > 0 ? Math.max(...rates.map((r) => r.perMs)) : null,
      fair: newest.policy?.fair === true,
      build: newest.build,
      policy: newest.policy,
    };
    const d = store.definition(namespace, name);
    if (!d) continue;
    const before = { maxAttempts: d.maxAttempts, timeoutMs: d.timeoutMs, concurrencyLimit: d.concurrencyLimit, rateLimit: d.rateLimit, ratePerMs: d.ratePerMs, fair: d.fair, build: d.build, policy: d.policy };
    if (canonical(before) === canonical(next)) continue;
    Object.assign(d, copyJson(next), { registeredAt: newest.startedAt });
    changed++;
  }
  // A definition that is not fair has no row with a fair turn (refresh_definitions.sql): its Ready
  // rows lose theirs, and its Executing and Waiting ones when fair order was just turned off.
  for (const name of names) {
    const d = store.definition(namespace, name);
    if (!d || d.fair) continue;
    const statuses = wasFair.includes(name) ? ['ready', 'executing', 'waiting'] : ['ready'];
    for (const j of store.jobsIn(namespace)) if (j.definition === name && j.fairTag !== null && statuses.includes(j.status)) j.fairTag = null;
  }
  const ns = store.namespaces.get(namespace);
  if (changed > 0 && ns) ns.policyVersion++;
  if (changed > 0) reconcileSchedules(store, tx, namespace, names);
  return changed > 0;
}

/** acta.stop_worker (sql/functions/stop_worker.sql). */
export function stopWorker(store: Store, tx: Tx, workerId: string): void {
  const w = store.workers.get(workerId);
  if (!w) return;
  w.status = 'stopped';
  w.stoppedAt = tx.now;
  if (refreshDefinitions(store, tx, w.namespace, w.definitions)) recheckGates(store, tx, w.namespace, w.definitions);
}

/** acta.take_passes (sql/functions/take_passes.sql). */
export function takePasses(store: Store, tx: Tx, namespace: string, passes: PassSchedule[]): string[] {
  for (const p of passes) if (!store.pass(namespace, p.name)) store.insertPass(namespace, p.name, tx.now);
  for (const p of passes) {
    const row = store.pass(namespace, p.name)!;
    if (row.dueAt > tx.now + p.intervalMs) row.dueAt = tx.now + p.intervalMs;
  }
  const taken: string[] = [];
  for (const p of passes) {
    const row = store.pass(namespace, p.name)!;
    if (row.dueAt > tx.now) continue;
    row.dueAt = tx.now + p.intervalMs;
    taken.push(p.name);
  }
  return taken;
}

/** acta.release_passes (sql/functions/release_passes.sql). */
export function releasePasses(store: Store, tx: Tx, namespace: string, passes: string[]): void {
  for (const name of passes) {
    const row = store.pass(namespace, name);
    if (row && row.dueAt > tx.now) row.dueAt = tx.now;
  }
}

/** acta.heartbeat (sql/functions/heartbeat.sql); never 'locked': nothing else holds a row here. */
export function heartbeat(store: Store, tx: Tx, args: HeartbeatArgs): HeartbeatResult {
  const passes = passesOf(args);
  // acta.passes references acta.namespaces: a pass of a namespace no worker registered fails the call.
  if (passes.length > 0 && !store.namespaces.has(args.namespace)) {
    throw new SqlStateError('23503', 'insert or update on table "passes" violates foreign key constraint "passes_namespace_fkey"');
  }
  const worker = store.workers.get(args.workerId);
  if (worker && worker.status !== 'stopped') {
    worker.lastHeartbeatAt = tx.now;
    worker.status = 'alive';
  }
  const renewed = new Set<number>();
  for (const pair of args.held) {
    const job = store.jobs.get(jobIdOf(pair.id));
    if (job && job.execution === pair.execution && job.status === 'executing' && job.leaseHolder === args.workerId) renewed.add(job.id);
  }
  for (const id of renewed) {
    const job = store.jobs.get(id)!;
    job.leaseExpiresAt = tx.now + args.leaseMs;
    // The SQL joins the pairs by id: one that names the job twice gives either's `started`.
    job.started ||= args.held.some((p) => jobIdOf(p.id) === id && p.started);
  }
  // Answered per pair by its job: a job never held twice by one worker, as the registry keeps it.
  const out: HeartbeatResult = { renewed: [], locked: [], lost: [], cancel: [], duePasses: takePasses(store, tx, args.namespace, passes) };
  for (const pair of args.held) {
    const id = jobIdOf(pair.id);
    (!renewed.has(id) ? out.lost : store.jobs.get(id)!.cancelRequestedAt !== null ? out.cancel : out.renewed).push(pair);
  }
  releaseWaits(store, tx, args.namespace);
  const ns = store.namespaces.get(args.namespace);
  if (ns) out.policyVersion = ns.policyVersion;
  return out;
}

/** src/db/workers.ts loadPolicies: the namespace's policy version and the applied policies of `names`. */
export function loadPolicies(store: Store, namespace: string, names: string[]): { version: number; policies: AppliedPolicy[] } {
  const ns = store.namespaces.get(namespace);
  if (!ns) return { version: 0, policies: [] };
  const policies: AppliedPolicy[] = [];
  for (const d of store.allDefinitions()) {
    if (d.namespace !== namespace || !names.includes(d.name)) continue;
    policies.push({
      name: d.name,
      maxAttempts: d.maxAttempts,
      timeoutMs: d.timeoutMs,
      backoff: copyJson(d.policy?.backoff ?? null),
      concurrencyLimit: d.concurrencyLimit,
      rateLimit: d.rateLimit,
      ratePerMs: d.ratePerMs,
      fair: d.fair,
      build: d.build,
    });
  }
  return { version: ns.policyVersion, policies };
}
