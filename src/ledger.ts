import { type Db, type ListenHandlers, type ListenOptions, withDeadline } from './db/Db';
import { armSchedules, listSchedules, type ScheduleRecord, setSchedulePaused, storedZones, unarmedSchedules } from './db/schedules';
import { armInstants, schedulesAsStored, type UnparsableSchedule } from './recurring/schedules';
import { completeExecutions } from './db/executions';
import { cancelJob, claimJobs, countJobs, enqueueJobs, type EnqueueRows, type JobCount, type ProgressRow, readAbsence, readJob, recoverJobs, reportProgress, watchJob } from './db/jobs';
import { assertMigrated } from './db/migrator';
import { type AlertRow, type AlertThresholds, evaluateAlerts, readAlerts } from './db/alerts';
import { releasePasses } from './db/namespaces';
import { listPauses, pause, type PauseAnswer, type PauseRecord, type PauseScope, resume } from './db/pauses';
import { type FanOutBatch, fanOutEvents, publishEvents, type PublishRows } from './db/outbox';
import { pruneJobs, type RetentionAges } from './db/retention';
import { loadSteps, recordStep } from './db/steps';
import type { CancelAnswer, ClaimArgs, ClaimResult, CompletionAck, CompletionRow, HeartbeatArgs, HeartbeatResult, JobId, JobRecord, RecoveredRow, RegisterArgs, StepRecord } from './db/types';
import { type AppliedPolicy, heartbeat, loadPolicies, registerWorker, stopWorker } from './db/workers';
import { type ChildOutcome, readChildren, sendSignal, type SendSignalArgs, type SignalOutcome, spawnChildren, type SpawnArgs } from './db/workflows';

/**
 * The ledger as a worker and a client use it: every call a stage makes to the database, one round
 * trip each but registerWorker with declared schedules, which reads their stored zones first (docs/DESIGN.md, "Storage"). `sqlLedger(db)` makes them on PostgreSQL or PGlite
 * through the SQL functions of sql/functions/; `acta/testing`'s in-memory ledger makes the same
 * decisions in memory, its answers arriving on a scheduler. One contract suite runs against both
 * (test/ledger/), so the two cannot drift apart.
 */
export interface Ledger {
  /** Throws SchemaNotMigratedError / SchemaNewerError when the store is not at this version. */
  assertReady(): Promise<void>;
  registerWorker(args: RegisterArgs): Promise<{ duePasses: string[] }>;
  loadPolicies(namespace: string, names: string[]): Promise<{ version: number; policies: AppliedPolicy[] }>;
  claimJobs(args: ClaimArgs): Promise<ClaimResult>;
  /** One ack per row, in order. At most one row per (id, execution): the finalizer never repeats one; which of two differing outcomes wins is not defined. */
  completeExecutions(workerId: string, rows: CompletionRow[]): Promise<CompletionAck[]>;
  heartbeat(args: HeartbeatArgs): Promise<HeartbeatResult>;
  recoverJobs(args: { namespace: string; deadAfterMs: number; limit?: number }): Promise<RecoveredRow[]>;
  releasePasses(namespace: string, passes: string[]): Promise<void>;
  stopWorker(workerId: string): Promise<void>;
  loadSteps(jobId: JobId): Promise<Map<string, unknown>>;
  recordStep(args: { workerId: string; jobId: JobId; execution: number; name: string; resultJson: string }): Promise<StepRecord>;
  /** The latest ctx.progress value of running attempts (src/worker/progress.ts); how many rows took theirs. */
  reportProgress(workerId: string, rows: ProgressRow[]): Promise<number>;
  /**
   * The schedules pass (docs/schedules.md): arms every schedule of the namespace that needs a fire;
   * how many. One this runtime cannot parse stays unarmed and is told to `onUnparsable`. Absent:
   * the ledger keeps no schedules.
   */
  armSchedules?(namespace: string, onUnparsable?: (u: UnparsableSchedule) => void): Promise<number>;
  /** The namespace's schedules (or the one named), as client.schedules.list shows them. */
  listSchedules?(namespace: string, name?: string): Promise<ScheduleRecord[]>;
  /** Pauses (its unstarted armed fire deleted) or resumes a schedule; false: no such schedule. A resumed one is armed by the next pass. */
  pauseSchedule?(namespace: string, name: string, paused: boolean): Promise<boolean>;
  /**
   * NOTIFY (Db.listen's contract): 'acta_jobs' carries a namespace per wakeup, 'outbox:<namespace>'
   * per publish, and 'cancel:<worker>:<job>:<execution>' when a client cancels a running job;
   * 'acta_job' the id of a watched job that changed.
   */
  listen(channel: string, handlers: ListenHandlers, options?: ListenOptions): Promise<() => Promise<void>>;
  /**
   * sys.retention's batch (acta.prune_jobs): up to `limit` finished rows older than their state's
   * age deleted with their attempts and steps, under a statement timeout of `timeoutMs`; how many.
   */
  pruneJobs(args: { namespace: string; ages: RetentionAges; limit: number; timeoutMs: number }): Promise<number>;
  /**
   * sys.alerts' evaluation (acta.evaluate_alerts): every rule, each alert raised or resolved once,
   * an `onAlert` job per change in the same transaction; every alert of the namespace after it.
   */
  evaluateAlerts(args: { namespace: string; thresholds: AlertThresholds; onAlert: string | null }): Promise<AlertRow[]>;
  /** The outbox (docs/outbox.md): events written at once, their ids in input order (acta.publish_events). */
  publishEvents(namespace: string, rows: PublishRows): Promise<string[]>;
  /**
   * sys.outbox's batch (acta.fan_out_events): up to `limit` of the oldest events, each made one job
   * per subscribed definition and deleted, under a statement timeout of `timeoutMs`.
   */
  fanOutEvents(args: { namespace: string; limit: number; timeoutMs: number }): Promise<FanOutBatch>;
  /** The namespace's alerts as stored, for the acta_alert metric. */
  readAlerts(namespace: string): Promise<{ rule: string; subject: string; open: boolean }[]>;
  /** The namespace's Ready, Waiting and Executing jobs by definition, each status counted up to `cap`, for the acta_jobs metric. Absent: the worker reports no acta_jobs. */
  countJobs?(namespace: string, cap: number): Promise<JobCount[]>;
  /** A client's calls. */
  enqueueJobs(namespace: string, rows: EnqueueRows): Promise<{ id: JobId | null; created: boolean }[]>;
  readJob(namespace: string, id: string): Promise<JobRecord | null>;
  cancelJob(namespace: string, id: string): Promise<CancelAnswer>;
  /** Marks a job observed, so that its changes notify 'acta_job'; false when the namespace has no such job. */
  watchJob(namespace: string, id: string): Promise<boolean>;
  /** Why the namespace has no job `id` (src/db/jobs.ts, readAbsence). */
  readAbsence(namespace: string, id: string): Promise<{ retentionZero: boolean; issued: boolean }>;
  /** Stops the claims of a namespace or one definition (acta.pause); the pause that stands. */
  pause(args: PauseScope & { by?: string | null; reason?: string | null }): Promise<PauseAnswer>;
  /** Lifts that scope's pause (acta.resume); true when it was paused. */
  resume(args: PauseScope): Promise<boolean>;
  listPauses(namespace: string): Promise<PauseRecord[]>;
  /** Workflows (docs/workflows.md): a signal into a job's mailbox (acta.send_signal). */
  sendSignal(args: SendSignalArgs): Promise<{ jobId: JobId | null; outcome: SignalOutcome }>;
  /** A parent's children enqueued as its recorded step (acta.spawn_children). */
  spawnChildren(args: SpawnArgs): Promise<StepRecord>;
  /** The outcomes of `ids`, the ids a parent's spawns recorded (a child, or a job an idempotency key named), in order ('deleted' for a row gone). */
  readChildren(parentId: JobId, ids: JobId[]): Promise<ChildOutcome[]>;
}

export type { ClaimArgs, HeartbeatArgs, RegisterArgs } from './db/types';

/**
 * `args` with each declared schedule's zone spelled as stored where it is the same zone (an older
 * ICU's name: src/recurring/schedules.ts zoneAsStored), so a build on another Node changes no
 * schedule it declares alike. One read of the declared names' rows, none without schedules.
 */
async function zonesAsStored(db: Db, args: RegisterArgs): Promise<RegisterArgs> {
  const policies = args.policies;
  const names = Object.values(policies ?? {}).flatMap((p) => (p.schedules ?? []).map((s) => s.name));
  if (!policies || names.length === 0) return args;
  const stored = await storedZones(db, args.namespace, names);
  const asStored = Object.fromEntries(Object.entries(policies).map(([d, p]) => [d, p.schedules ? { ...p, schedules: schedulesAsStored(p.schedules, stored) } : p]));
  return { ...args, policies: asStored };
}

/**
 * The ledger on a database: each call is the SQL function's typed wrapper in src/db/. With
 * `deadlineMs` (a worker's: LeaseClock.callDeadlineMs), each call is made withDeadline: on a server
 * it is answered within it, or its connection is destroyed and it fails as transient (DbUnansweredError);
 * a batch with a statement timeout of its own (pruneJobs, fanOutEvents) gets that timeout more.
 */
export function sqlLedger(base: Db, options: { deadlineMs?: number } = {}): Ledger {
  const { deadlineMs } = options;
  const within = (extraMs: number): Db => (deadlineMs === undefined ? base : withDeadline(base, deadlineMs + extraMs));
  const db = within(0);
  return {
    assertReady: () => assertMigrated(db),
    registerWorker: async (args) => registerWorker(db, await zonesAsStored(db, args)),
    loadPolicies: (namespace, names) => loadPolicies(db, namespace, names),
    claimJobs: (args) => claimJobs(db, args),
    completeExecutions: (workerId, rows) => completeExecutions(db, workerId, rows),
    heartbeat: (args) => heartbeat(db, args),
    recoverJobs: (args) => recoverJobs(db, args),
    releasePasses: (namespace, passes) => releasePasses(db, namespace, passes),
    stopWorker: (workerId) => stopWorker(db, workerId),
    loadSteps: (jobId) => loadSteps(db, jobId),
    recordStep: (args) => recordStep(db, args),
    reportProgress: (workerId, rows) => reportProgress(db, workerId, rows),
    armSchedules: async (namespace, onUnparsable) => {
      const { names, versions, instants } = armInstants(await unarmedSchedules(db, namespace), onUnparsable);
      return armSchedules(db, namespace, names, versions, instants);
    },
    pruneJobs: (args) => pruneJobs(within(args.timeoutMs), args),
    evaluateAlerts: (args) => evaluateAlerts(db, args),
    readAlerts: (namespace) => readAlerts(db, namespace),
    countJobs: (namespace, cap) => countJobs(db, namespace, cap),
    publishEvents: (namespace, rows) => publishEvents(db, namespace, rows),
    fanOutEvents: (args) => fanOutEvents(within(args.timeoutMs), args),
    listSchedules: (namespace, name) => listSchedules(db, namespace, name),
    pauseSchedule: (namespace, name, paused) => setSchedulePaused(db, namespace, name, paused),
    listen: (channel, handlers, listenOptions) => base.listen(channel, handlers, listenOptions),
    enqueueJobs: (namespace, rows) => enqueueJobs(db, namespace, rows),
    readJob: (namespace, id) => readJob(db, namespace, id),
    cancelJob: (namespace, id) => cancelJob(db, namespace, id),
    watchJob: (namespace, id) => watchJob(db, namespace, id),
    readAbsence: (namespace, id) => readAbsence(db, namespace, id),
    pause: (args) => pause(db, args),
    resume: (args) => resume(db, args),
    listPauses: (namespace) => listPauses(db, namespace),
    sendSignal: (args) => sendSignal(db, args),
    spawnChildren: (args) => spawnChildren(db, args),
    readChildren: (parentId, ids) => readChildren(db, parentId, ids),
  };
}
