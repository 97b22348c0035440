/*
 * ctx.waitForSignal, ctx.spawn, ctx.spawnMany and ctx.waitForChildren of one attempt
 * (docs/workflows.md; docs/DESIGN.md, "Workflows"). The rules are here; where the steps and
 * children are kept is the WorkflowStore's (the ledger for a worker, memory for runAttempt).
 */
import type { SchedulerLike } from 'rxjs';
import type { ChildOutcome } from '../db/workflows';
import type { EnqueueRows } from '../db/jobs';
import type { JobId, ResultTypeOfId, StepRecord } from '../db/types';
import { AttemptCancelledError, ChildFailedError, ChildInParentLaneError, ConfigError, type EnqueueRefusedError, JobCancelledError, SignalTimeoutError } from '../errors';
import { refusal, type RefusedElement, refusedElement, refusedError } from '../policies/enqueueRule';
import type { Definition, NotAny, ResultOf } from '../definition';
import type { Queryable } from '../db/Db';
import { toJsonText } from '../json';
import type { Ledger } from '../ledger';
import { knownKeys } from '../config';
import { refusedCall } from '../worker/refusals';
import { type Entry, type Registry, throwIfAborted } from '../worker/registry';
import { type WaitRequest, WaitRequestedError, waitStep } from './wait';
import { checkSignalName, checkTimeoutMs } from './signals';
import { type ChildOptions, type KnownDefinition, spawnRows, type SpawnItem, type SpawnItemOf } from './children';

/** Where an attempt's waits and children are kept. */
export interface WorkflowStore {
  /** Every recorded step of the job: name → result. */
  load(): Promise<Map<string, unknown>>;
  /** Enqueues the children and records step `step` with {ids}, fenced (acta.spawn_children). */
  spawn(step: string, rows: EnqueueRows, failParent: boolean[]): Promise<StepRecord>;
  /** The outcomes of children `ids`, in order. */
  children(ids: JobId[]): Promise<ChildOutcome[]>;
  /** The spawning worker's own definition of `name`, if it runs one: its children's keys are computed with it. */
  definition: KnownDefinition;
  /** The error for a child the enqueue's Rule refused (src/policies/enqueueRule.ts), in a spawn's words. */
  refused(element: RefusedElement): Promise<EnqueueRefusedError>;
}

/** A child's statuses that end it for its parent's wait. */
const ENDED = new Set<string>(['succeeded', 'failed', 'cancelled', 'deleted']);

/** A spawn step's result (acta.spawn_children): the ids, and the indexes of the children in a lane the parent or an unfinished ancestor holds. */
interface SpawnResult {
  ids: JobId[];
  inLane?: number[];
}

/** What a signal wait for several names returns. */
export interface SignalReceived<T = unknown> {
  name: string;
  payload: T;
}

export interface WorkflowContext {
  /**
   * Waits for a signal (client.signal, acta signal): returns its payload (for several names,
   * {name, payload}). Not arrived yet: the attempt ends and the job parks as Waiting (no attempt
   * charged, no executor or concurrency slot held), and runs again when it arrives, this call then
   * returning it. A signal sent before is kept and consumed at once. `timeoutMs` (integer ms):
   * SignalTimeoutError after it, honoured within one heartbeat interval.
   */
  waitForSignal<T = unknown>(name: string, options?: { timeoutMs?: number }): Promise<T>;
  waitForSignal<T = unknown>(names: readonly string[], options?: { timeoutMs?: number }): Promise<SignalReceived<T>>;
  /**
   * Enqueues a child job as a recorded step (a retried parent never spawns it twice); its id.
   * Typed as client.enqueue: given the definition, the payload is checked against its handler's
   * payload type and the id carries its result type (JobId<R>); given a name, against `P` when it is
   * stated, and the id is plain unless `R` is.
   */
  spawn<P = unknown, R = unknown>(definition: string | Definition<P, R>, payload: NoInfer<P>, options?: ChildOptions): Promise<JobId<NotAny<R>>>;
  /**
   * Many children in one step; their ids in order. Typed as client.enqueueMany: an item given a
   * definition has its payload checked against it (SpawnItemOf) and its id carries its result type.
   * An empty array spawns nothing and records no step: [].
   */
  spawnMany<D extends readonly (string | Definition<any, any>)[]>(items: readonly [...{ [K in keyof D]: SpawnItemOf<D[K]> }]): Promise<{ -readonly [K in keyof D]: JobId<ResultOf<D[K]>> }>;
  /**
   * Parks the job until every child spawned so far has ended (succeeded, failed for good,
   * cancelled or deleted), then returns each child's outcome in spawn order. Throws
   * ChildFailedError when a child spawned 'fail-parent' did not succeed, ChildInParentLaneError
   * when a child that has not ended is in a lane the parent or an ancestor holds (it could not
   * start before that job ends); either way the parent fails without retry.
   * Types: `R` is the children's result type as the caller states it (not checked, as
   * client.result<R>'s); unstated, `result` is unknown. For outcomes typed by the children's own
   * definitions, give their ids (the overload below).
   */
  waitForChildren<R = unknown>(): Promise<ChildOutcome<R>[]>;
  /**
   * As above (it waits for every child spawned so far), but returns the outcomes of `children`
   * only, in their order: ids this attempt's spawns returned (ConfigError otherwise, which fails the
   * job without retry). Each outcome is typed by its id: a child spawned by its definition has
   * `result` typed as that definition's result's JSON form (ChildOutcome<R>), e.g.
   * `const [mail, thumb] = await ctx.waitForChildren([mailId, thumbId])`, or the array spawnMany returned.
   */
  waitForChildren<I extends readonly string[]>(children: readonly [...I]): Promise<{ -readonly [K in keyof I]: ChildOutcome<ResultTypeOfId<I[K]>> }>;
}

export interface Workflow extends WorkflowContext {
  /** The wait the attempt asked for, if any: it ends the attempt parked, whatever the handler did next. */
  parked(): WaitRequest | undefined;
}

export function createWorkflow(store: WorkflowStore, entry: Entry, registry: Registry, scheduler: SchedulerLike): Workflow {
  let recorded: Promise<Map<string, unknown>> | undefined;
  let parked: WaitRequest | undefined;
  const calls = { signal: 0, children: 0, spawn: 0 };
  /** The children spawned so far in this run: whether each fails the parent, and whether it is in the parent's own lane. */
  const spawned: { id: JobId; failParent: boolean; inParentLane: boolean; lane: string | null }[] = [];
  const steps = () => (recorded ??= store.load());
  const park = (wait: WaitRequest): never => {
    parked ??= wait;
    throw new WaitRequestedError(wait);
  };
  const live = () => {
    if (scheduler.now() >= entry.deadlineAt) registry.abort(entry, 'deadline');
    throwIfAborted(entry);
  };

  async function waitForSignal(nameOrNames: string | readonly string[], options?: { timeoutMs?: number }): Promise<unknown> {
    const many = typeof nameOrNames !== 'string';
    let names: string[];
    let timeoutMs: number | null;
    try {
      names = many ? (Array.isArray(nameOrNames) ? [...(nameOrNames as readonly string[])] : []) : [nameOrNames as string];
      if (names.length === 0) throw new ConfigError('waitForSignal needs a signal name or a non-empty array of names');
      names.forEach(checkSignalName);
      // A misspelt option (`{ timeout }`) or a bare number would park the job with no timeout at all.
      if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
        throw new ConfigError(`waitForSignal's options are { timeoutMs? }, got ${JSON.stringify(options) ?? typeof options}`);
      }
      if (options !== undefined) knownKeys('waitForSignal option', options, ['timeoutMs']);
      timeoutMs = options?.timeoutMs === undefined ? null : checkTimeoutMs(options.timeoutMs);
    } catch (err) {
      throw refusedCall(err); // the job fails without retry (src/worker/refusals.ts)
    }
    const step = waitStep('signal', calls.signal++);
    const answer = (await steps()).get(step) as { timedOut?: boolean; name?: string; payload?: unknown } | undefined;
    if (answer === undefined) {
      // An aborted attempt's wait throws the abort's typed error, as a step and a spawn do
      // (docs/reference.md, "Durable steps"), not the internal WaitRequestedError.
      live();
      return park({ outcome: 'signal_wait', step, names, timeoutMs });
    }
    if (answer.timedOut) throw new SignalTimeoutError(names, timeoutMs ?? 0);
    return many ? { name: answer.name, payload: answer.payload } : answer.payload;
  }

  async function spawnAll(items: readonly SpawnItem[]): Promise<JobId[]> {
    const step = waitStep('spawn', calls.spawn++);
    let spawning: ReturnType<typeof spawnRows>;
    try {
      spawning = spawnRows(items, store.definition);
    } catch (err) {
      throw refusedCall(err); // a bad child or option: the job fails without retry (src/worker/refusals.ts)
    }
    const { rows, failParent } = spawning;
    let recordedSpawn = (await steps()).get(step) as SpawnResult | undefined;
    if (!recordedSpawn) {
      live();
      let outcome: StepRecord;
      try {
        outcome = await store.spawn(step, rows, failParent);
      } catch (err) {
        // client.enqueue's Rule (rows.checks): a child of a definition no worker declared, or
        // lacking a key its policy needs, would wait for ever or run outside its limits; nothing
        // was spawned (test/db/workflows.test.ts, "a child named by a definition no worker declared").
        const refused = refusedElement(err);
        throw refused ? await store.refused(refused) : err;
      }
      if (outcome.status === 'stale') {
        registry.abort(entry, 'lost');
        throw new AttemptCancelledError(`spawn could not be recorded: the attempt no longer owns job ${entry.row.id}`);
      }
      if (outcome.status === 'cancelled') {
        // The job's cancel was requested before its worker heard of it: the attempt ends Cancelled.
        registry.abort(entry, 'cancelled');
        throw new JobCancelledError(entry.row.id, 'job cancelled while it ran (client.cancel): its children were not spawned');
      }
      (await steps()).set(step, outcome.result);
      recordedSpawn = outcome.result as SpawnResult;
    }
    const { ids, inLane = [] } = recordedSpawn;
    ids.forEach((id, i) => spawned.push({ id, failParent: failParent[i], inParentLane: inLane.includes(i), lane: rows.lanes?.[i] ?? null }));
    return ids;
  }

  return {
    waitForSignal: waitForSignal as WorkflowContext['waitForSignal'],
    // The ids' result types are the interface's (JobId<R>, a brand that exists only in types).
    spawn: (async (definition: string | Definition, payload: unknown, options?: ChildOptions) => (await spawnAll([{ definition, payload, ...options }]))[0]) as WorkflowContext['spawn'],
    spawnMany: ((items: readonly SpawnItem[]) => {
      if (!Array.isArray(items)) return Promise.reject(refusedCall(new ConfigError('spawnMany needs an array of { definition, payload, ...options }')));
      // No children: no step, and no ordinal taken, so the spawns after it keep their step names
      // whether the array was empty or not on another attempt; [] as enqueueMany([]) answers.
      if (items.length === 0) return Promise.resolve([]);
      return spawnAll(items);
    }) as WorkflowContext['spawnMany'],
    waitForChildren: (async (children?: readonly string[]) => {
      let picked: number[] | undefined;
      try {
        picked = children === undefined ? undefined : pickChildren(children, spawned);
      } catch (err) {
        throw refusedCall(err); // not this attempt's children: the job fails without retry (src/worker/refusals.ts)
      }
      const step = waitStep('children', calls.children++);
      const ids = spawned.map((c) => c.id);
      if (ids.length === 0) return [];
      if (!(await steps()).has(step)) {
        live(); // as waitForSignal's park
        // A child in a lane the parent or an unfinished ancestor held at the spawn, that has not
        // ended (cancelled or deleted ones have), could never start while that job holds the lane.
        const inLane = spawned.filter((c) => c.inParentLane);
        if (inLane.length > 0) {
          const open = (await store.children(inLane.map((c) => c.id))).findIndex((o) => !ENDED.has(o.status));
          if (open >= 0) throw new ChildInParentLaneError(String(inLane[open].id), inLane[open].lane ?? '');
        }
        return park({ outcome: 'children_wait', step, timeoutMs: null });
      }
      const outcomes = await store.children(ids);
      // Only an outcome that has ended fails the parent: a fail-parent failure wakes it while its
      // siblings may still run, and a job an idempotency key named is read as it is, ended or not.
      const failed = outcomes.find((o, i) => spawned[i].failParent && ENDED.has(o.status) && o.status !== 'succeeded');
      if (failed) throw new ChildFailedError(failed);
      return picked === undefined ? outcomes : picked.map((i) => outcomes[i]);
    }) as WorkflowContext['waitForChildren'],
    parked: () => parked,
  };
}

/**
 * The indexes in `spawned` of the ids waitForChildren(children) was given, in their order; ConfigError
 * for a value that is not an array of ids this attempt's spawns returned (test/testing/workflows.spec.ts).
 */
function pickChildren(children: readonly string[], spawned: readonly { id: JobId }[]): number[] {
  if (!Array.isArray(children)) throw new ConfigError(`waitForChildren takes nothing or an array of the ids spawn and spawnMany returned, got ${JSON.stringify(children) ?? typeof children}`);
  const index = new Map(spawned.map((c, i) => [String(c.id), i]));
  return children.map((id) => {
    const i = index.get(String(id));
    if (i === undefined) throw new ConfigError(`waitForChildren was given ${JSON.stringify(id) ?? typeof id}, which no spawn of this attempt returned (spawned so far: ${spawned.length})`);
    return i;
  });
}

/** toJsonText, for a payload (a signal's or a child's). */
export const payloadJson = (value: unknown): string => toJsonText(value === undefined ? null : value);

/**
 * The worker's store: the job's steps and children in the ledger, each call one round trip,
 * through `persist`: the worker's repeats them on transient database errors as a step's calls
 * are (src/worker/steps.ts, persistentCall).
 * Repeating a spawn is safe: one that committed before its answer was lost comes back 'exists'
 * with its children's ids (acta.spawn_children).
 */
export function ledgerWorkflowStore(
  ledger: Pick<Ledger, 'loadSteps' | 'spawnChildren' | 'readChildren'>,
  workerId: string,
  entry: Entry,
  persist: <R>(call: () => Promise<R>) => Promise<R>,
  namespace: { name: string; runs: ReadonlyMap<string, Definition>; db?: Queryable },
): WorkflowStore {
  return {
    load: () => persist(() => ledger.loadSteps(entry.row.id)),
    spawn: (step, rows, failParent) => persist(() => ledger.spawnChildren({ workerId, parentId: entry.row.id, execution: entry.row.execution, step, rows, failParent })),
    children: (ids) => persist(() => ledger.readChildren(entry.row.id, ids)),
    definition: (name) => namespace.runs.get(name),
    refused: async (element) => refusedError(await refusal(namespace.db, namespace.name, element), 'spawn'),
  };
}
