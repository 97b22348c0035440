import { asyncScheduler, type Observable, type SchedulerLike } from 'rxjs';
import { type ClientSchedules, clientSchedules } from './schedules';
import { createPublish, type PublishItem, type PublishOptions, type PublishResult } from './publish';
import { createSignal, type SignalOptions, type SignalTarget } from './signals';
import type { SignalResult } from '../workflows/signals';
import { knownKeys, MAX_NAME_BYTES, nameOption, optionsOf, schedulerOption } from '../config';
import type { Db, Queryable } from '../db/Db';
import { cancelJob, enqueueJobs, readJob } from '../db/jobs';
import type { JobId, JobRecord, ResultOfId, TypedJobId } from '../db/types';
import { schemaError } from '../db/schemaVerdict';
import { checkDefinition, type Definition, type ItemOf, type NotAny, type ResultOf } from '../definition';

export type { PayloadOf, ResultOf } from '../definition';
import { ActaError, atItem, ConfigError, InvalidJsonError } from '../errors';
import { refusal, refusedElement, refusedError } from '../policies/enqueueRule';
import { type Ledger, sqlLedger } from '../ledger';
import { why, type WhyAnswer } from '../ops/why';
import { type Admin, createAdmin } from './admin';
import { ENQUEUE_OPTION_KEYS, enqueueRows } from './enqueueRows';
import { createFollowers, type ObserveOptions, type ResultOptions } from './follow';
import { jobIdText, shown } from './jobId';

export type { ObserveOptions, ResultOptions } from './follow';

/** Options of one job at enqueue. */
export interface EnqueueOptions {
  /** When the job becomes due (absolute time, from 4713 BC on: timestamptz). Default: now, on the database clock. */
  runAt?: Date;
  /** Higher runs first. Integer, default 0. */
  priority?: number;
  /**
   * Attempts before the job ends Failed, ≥ 1. Default: its definition's `maxAttempts` as the
   * worker running it declares it, else 25. A job's own value wins over its definition's, above
   * or below it (migration 0004).
   */
  maxAttempts?: number;
  /**
   * At most one job per key in the namespace, ever (until the row is deleted: sys.retention, docs/retention.md): a second enqueue
   * with the same key creates nothing and returns the first job's id with `created: false`.
   * A non-empty string of at most 2,000 bytes in UTF-8, without \u0000 or a lone surrogate.
   */
  idempotencyKey?: string;
  /**
   * The job's concurrency key, rate key and lane (docs/DESIGN.md, "Policies"): each given one wins
   * over what its definition's `concurrency.key`, `rate.key` or `lane` function computes from the
   * payload (which the client can only do when it has the definition: given to enqueue, or in the
   * client's `definitions`). A non-empty string of at most 1,000 bytes in UTF-8, without \u0000.
   */
  concurrencyKey?: string;
  rateKey?: string;
  lane?: string;
  /**
   * Enqueue a job of a definition given by name even though the namespace's stored definitions
   * refuse it (a definition whose worker is deployed later): no worker has declared the name, or
   * its declared policies need keys this job lacks. `acta enqueue --force`. Default: the client's
   * `force`, else false (docs/reference.md, "Which definitions a client may enqueue").
   */
  force?: boolean;
  /**
   * Enqueue inside the caller's own transaction: a `pg` client (or any Queryable) on which the
   * caller ran BEGIN. The job exists, and workers are woken, only when that transaction commits.
   * A job the stored definitions refuse aborts that transaction (the refusal is a failed statement).
   */
  tx?: Queryable;
}

/**
 * What enqueue returns for each job. `R`: its definition's result type, when enqueue was given the
 * definition itself; the id then carries it to result, observe and getJob (JobId<R>).
 */
export interface EnqueueResult<R = unknown> {
  /** The job's id (bigint as a decimal string). */
  id: JobId<R>;
  /** false when an idempotency key matched an existing job. */
  created: boolean;
}

/** One element of enqueueMany. */
export interface EnqueueItem<P = unknown> extends Omit<EnqueueOptions, 'tx'> {
  /** The definition's name, or the definition itself (its `name` is used). */
  definition: string | Definition<any, any>;
  payload: P;
}

/**
 * An enqueueMany element whose `definition` is `D`, its payload checked against `PayloadOf<D>`
 * (ItemOf): `enqueueMany([{ definition: sendEmail, payload: { to } }, { definition: resize, payload: { w } }])`.
 */
export type EnqueueItemOf<D> = ItemOf<EnqueueItem, D>;

/** Receives a wakeup after each enqueue that committed (e.g. Redis PUBLISH), in addition to NOTIFY. */
export type WakeupPublisher = (namespace: string) => void;

export interface ClientOptions {
  /** The database. Required unless `ledger` is given. */
  db?: Db;
  /** The ledger to enqueue into and read from instead of `db` (acta/testing's in-memory ledger); no `tx` then. */
  ledger?: Ledger;
  /** Queue namespace, default "default". */
  namespace?: string;
  /** Extra wakeup channel (Redis) for setups where NOTIFY does not reach workers. */
  publishWakeup?: WakeupPublisher;
  /**
   * The definitions this client enqueues, when it knows them: an unknown name is then refused
   * with UnknownDefinitionError (nothing written), and a job's keys are computed with them.
   * Without them, a job given by name is checked against what the namespace's workers declared
   * (acta.definitions, in the enqueue's own statement): EnqueueRefusedError when no worker
   * declared the name there (it would never run) or its declared concurrency, rate or lane policy
   * needs a key the job lacks (it would run unlimited); `force` enqueues it anyway. (A job
   * without its own `maxAttempts` takes its definition's whether or not the client knows it:
   * the worker and recovery apply it.)
   */
  definitions?: Pick<Definition<any, any>, 'name' | 'maxAttempts' | 'concurrency' | 'rate' | 'lane' | 'fair'>[];
  /** The default of each enqueue's `force` (EnqueueOptions.force). Default false. */
  force?: boolean;
  /** The clock of observe's polling and result's timeout (a VirtualClock in virtual-time tests). Default `asyncScheduler`. */
  scheduler?: SchedulerLike;
}

export interface Client extends Admin {
  /**
   * Why the job is where it is (src/ops/why.ts): every cause the database holds, each with its
   * blocker, in one statement; null when the namespace has no such job. Throws ConfigError for a
   * malformed id, and for a client with a ledger and no database.
   */
  why(id: JobId | number | bigint): Promise<WhyAnswer | null>;
  /** Cron schedules of the namespace at runtime: add, list, pause, resume, trigger, remove (src/client/schedules.ts; docs/schedules.md). */
  readonly schedules: ClientSchedules;
  /**
   * Enqueues one job of a definition, given by name or as the definition itself (from defineJob;
   * its `name` is used). Given the definition, the payload is type-checked against its handler's
   * payload type, e.g. `client.enqueue(sendEmail, { to })`; given a name, against `P` when it is
   * stated (`client.enqueue<Mail>('send-email', { to })`), else not at all. One signature, not one
   * per kind of argument, so that a payload that does not match is reported at the payload.
   * Throws InvalidJsonError (nothing written) when the payload cannot be stored as jsonb
   * (including one beyond jsonb's 256 MB, which the database refuses), ConfigError on a bad or
   * unknown option, UnknownDefinitionError for a name outside the client's `definitions` (when
   * given), EnqueueRefusedError for a name the namespace's stored definitions refuse (a client
   * without `definitions`: ClientOptions.definitions), SchemaNotMigratedError when the database's acta schema is missing or older than this
   * client, SchemaNewerError when it is newer (a function the client calls changed shape).
   * Given the definition, the id it answers carries the handler's result type `R` (JobId<R>), so
   * `result(id)` resolves its JSON form; given a name, a plain id (unless `R` is stated).
   */
  enqueue<P = unknown, R = unknown>(definition: string | Definition<P, R>, payload: NoInfer<P>, options?: EnqueueOptions | null): Promise<EnqueueResult<NotAny<R>>>;
  /**
   * Enqueues a batch in ONE statement (and one NOTIFY). All payloads are checked first: one bad
   * payload refuses the whole batch with InvalidJsonError and nothing is written.
   * Results are in input order. The batch's payloads travel as one jsonb value, so together they
   * must stay under PostgreSQL's 256 MB limit for one jsonb value (else the database refuses the
   * statement, error 54000, and nothing is written): split larger batches.
   * Types: an element given a Definition has its payload checked against that definition's
   * (`EnqueueItemOf`), and its id carries that definition's result type (as enqueue's); one given
   * a name takes any payload and has a plain id.
   */
  enqueueMany<D extends readonly (string | Definition<any, any>)[]>(
    items: readonly [...{ [K in keyof D]: EnqueueItemOf<D[K]> }],
    options?: { tx?: Queryable },
  ): Promise<{ -readonly [K in keyof D]: EnqueueResult<ResultOf<D[K]>> }>;
  /**
   * Reads one job of this client's namespace: its status, payload, result (once Succeeded), last
   * error, attempts, times (database clock) and its finished attempts from the attempt ledger
   * (`acta.executions`), in one statement. Resolves null when the namespace has no job of that id
   * (e.g. one deleted, or one beyond bigint that no job can have). `id` is what enqueue returned
   * (a decimal string), or a safe integer or bigint. Throws ConfigError for an id that is not a
   * positive integer. `P`, `R`: the payload and result types the caller states (not checked);
   * an id that carries its result type (enqueue's of a definition: JobId<R>) types `result` as
   * the JSON form of its R. With `{ tx }`, read inside the caller's transaction (sees its own
   * uncommitted enqueues).
   */
  getJob<I extends TypedJobId>(id: I, options?: { tx?: Queryable } | null): Promise<JobRecord<unknown, ResultOfId<I>> | null>;
  getJob<P = unknown, R = unknown>(id: JobId | number | bigint, options?: { tx?: Queryable } | null): Promise<JobRecord<P, R> | null>;
  /**
   * Cancels a job of this client's namespace. A Ready one (queued, due later, waiting out a
   * retry's backoff, or parked on a gate) becomes Cancelled at once, is never claimed again, and
   * keeps its idempotency key. An Executing one is cancelled through its worker, fleet-wide: the
   * worker hears it (NOTIFY, else its next heartbeat), aborts the handler's `ctx.signal` (reason
   * 'cancelled'), and the job ends Cancelled, fenced like any write, unless the handler succeeded
   * first (getJob's `cancelRequestedAt` shows the request meanwhile). Resolves true when this call
   * cancelled the job or requested its cancellation; false when the namespace has no such job or
   * it has finished (it stays as it ended). Throws ConfigError for a malformed id. With `{ tx }`,
   * in the caller's transaction (undone if it rolls back).
   */
  cancel(id: JobId | number | bigint, options?: { tx?: Queryable } | null): Promise<boolean>;
  /**
   * The job's states as they change, across processes: an emission when its status, attempt,
   * progress (ctx.progress) or cancel request changed, the first one at once. Driven by NOTIFY
   * (one LISTEN per client, shared by all its observers; the job is marked watched: acta.watch_job),
   * with a poll every `pollMs` as the backstop. Ends with the job: completes after a Succeeded
   * state (its `result`), errors after a Failed one with JobFailedError (its stored error) and
   * after a Cancelled one with JobCancelledError; errors with JobNotFoundError when the namespace
   * has no such job. Cold: each subscription follows the job anew. Never throws: a bad id or
   * option errors the Observable (ConfigError). A transient database error (a restart, a lost
   * connection) is ridden out: the job is read again at the next poll or reconnect. When the Db
   * is closed under it, it errors with DbClosedError. Types: as getJob's (an id that carries its
   * result type types each state's `result`).
   */
  observe<I extends TypedJobId>(id: I, options?: ObserveOptions): Observable<JobRecord<unknown, ResultOfId<I>>>;
  observe<P = unknown, R = unknown>(id: JobId | number | bigint, options?: ObserveOptions): Observable<JobRecord<P, R>>;
  /**
   * The job's result once it Succeeded (observe's promise form): rejects with JobFailedError,
   * JobCancelledError, JobNotFoundError, or ResultTimeoutError when the job has not ended after
   * `timeoutMs` (a job that had ended is answered from the first read, whatever the timeout, unless
   * the database is away then), DbClosedError when the Db is closed first.
   * Types: given an id that carries its result type (enqueue's of a definition: JobId<R>), the
   * JSON form of R (`Jsonified<R>`: what jsonb stored, a Date as its ISO string); given any other
   * id, `R` as the caller states it (not checked), else unknown. A stated `R` wins either way.
   */
  result<I extends TypedJobId>(id: I, options?: ResultOptions): Promise<ResultOfId<I>>;
  result<R = unknown>(id: JobId | number | bigint, options?: ResultOptions): Promise<R>;
  /**
   * Sends signal `name` with `payload` to a job, by id or `{ idempotencyKey }` (docs/workflows.md):
   * consumed at once by a waitForSignal the job is parked on, else kept in its mailbox until one
   * consumes it. Answers `{ delivered: true, consumed }`, or `{ delivered: false, reason }`:
   * 'ended', 'not_found', 'duplicate' (options.idempotencyKey sent before). With `{ tx }`, in the
   * caller's transaction.
   */
  signal(job: SignalTarget, name: string, payload?: unknown, options?: SignalOptions | null): Promise<SignalResult>;
  /**
   * Publishes an event on `topic` (docs/outbox.md): with `{ tx }` in the caller's transaction, so
   * it exists at its commit and never after its rollback. sys.outbox makes it one job per
   * definition subscribed to the topic, exactly once; events of one `key` reach each subscriber in
   * publish order. Throws ConfigError for a bad topic, key or option, InvalidJsonError (nothing
   * written) for a message that cannot be stored as jsonb.
   */
  publish<M = unknown>(topic: string, message: M, options?: PublishOptions | null): Promise<PublishResult>;
  /** publish for many events in one statement: all checked first (an error names the item), results in input order. */
  publishMany(items: readonly PublishItem[], options?: { tx?: Queryable } | null): Promise<PublishResult[]>;
}

/** The keys of ClientOptions: createClient refuses any other. */
const CLIENT_OPTION_KEYS = ['db', 'namespace', 'publishWakeup', 'definitions', 'ledger', 'scheduler', 'force'];

/** Creates a client that enqueues jobs (docs/DESIGN.md, "The ledger"). */
export function createClient(options: ClientOptions): Client {
  // Called bare (or with a connection string) it would fail as a TypeError on `options.ledger`.
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError(`createClient takes options: { db } with a Db (createClient({ db: await connect() })), or { ledger } (acta/testing); got ${options === undefined ? 'nothing' : shown(options)}`);
  }
  knownKeys('client option', options, CLIENT_OPTION_KEYS);
  if (options.ledger === undefined && (options.db === null || typeof options.db !== 'object')) throw new ConfigError('a client needs a db (or a ledger)');
  const namespace = nameOption('namespace', options.namespace ?? 'default', MAX_NAME_BYTES);
  const ledger = options.ledger ?? sqlLedger(options.db as Db);
  /**
   * A caller's transaction is a Queryable of the database (null: none, like undefined); a ledger
   * without a db has none. Checked before anything is written: anything without a `query` function
   * would otherwise fail mid-call as a TypeError (test/db/enqueue.test.ts, "tx must be a transaction").
   */
  const inTx = (tx: Queryable | null | undefined): Queryable | undefined => {
    if (tx === undefined || tx === null) return undefined;
    if (typeof tx !== 'object' || typeof (tx as { query?: unknown }).query !== 'function') {
      throw new ConfigError(`tx must be the caller's transaction: an object with a query function (a pg client on which BEGIN ran, or db.transaction's tx), got ${typeof tx === 'object' ? 'an object without one' : shown(tx)}`);
    }
    if (options.db === undefined) throw new ConfigError('tx: this client has a ledger and no database, so no transactions');
    return tx;
  };
  /** The migrator's verdict on a database error (schemaError); a ledger's errors are its own. */
  const verdict = async (err: unknown, inCallersTx: boolean) => (options.db ? schemaError(options.db, err, inCallersTx) : err);
  if (options.force !== undefined && typeof options.force !== 'boolean') throw new ConfigError(`force must be a boolean, got ${shown(options.force)}`);
  if (options.publishWakeup !== undefined && typeof options.publishWakeup !== 'function') throw new ConfigError(`publishWakeup must be a function (namespace) => void (redisPublisher(redis)), got ${shown(options.publishWakeup)}`);
  /**
   * The extra wakeup, fire and forget (as redisPublisher): it follows a commit, so what it throws
   * must not reject the call that committed, or its caller would enqueue again, a second job (NOTIFY
   * went at the commit; the safety poll finds the job anyway: test/db/badInput.test.ts).
   */
  const wake = options.publishWakeup && (() => {
    try {
      options.publishWakeup?.(namespace);
    } catch {
      /* the publisher's own failure to report */
    }
  });
  for (const d of options.definitions ?? []) checkDefinition(d, false);
  // Two of one name: the client used the last one's policies, where createWorker refuses them.
  const names = (options.definitions ?? []).map((d) => d.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length > 0) throw new ConfigError(`duplicate definition names: ${[...new Set(twice)].join(', ')}`);
  const known = options.definitions ? new Map(options.definitions.map((d) => [d.name, d])) : undefined;
  /** `many`: called as enqueueMany, whose errors about an item name it (enqueue's one item is not named). */
  const enqueueItems = async (items: readonly EnqueueItem[], opts: { tx?: Queryable | null }, many: boolean): Promise<EnqueueResult[]> => {
    const tx = inTx(opts.tx);
    if (items.length === 0) return [];
    const rows = enqueueRows(items, { known, force: options.force ?? false, many });
    let result: Awaited<ReturnType<typeof enqueueJobs>>;
    try {
      result = tx ? await enqueueJobs(tx, namespace, rows) : await ledger.enqueueJobs(namespace, rows);
    } catch (err) {
      // 54000 (program_limit_exceeded): a payload beyond what one jsonb value holds (256 MB; a
      // string within it as well). One job: that payload cannot be stored, refused like any other.
      // A larger batch may only need splitting (see enqueueMany), so its error stays as it is.
      const refused = refusedElement(err);
      if (refused) {
        const refusedErr = refusedError(await refusal(options.db, namespace, refused), 'library');
        throw many ? atItem(refusedErr, refused.item) : refusedErr;
      }
      if (items.length === 1 && (err as { code?: unknown }).code === '54000') {
        throw new InvalidJsonError('$', `too large for jsonb (${(err as Error).message})`, { cause: err });
      }
      // No acta schema (3F000), or one older or newer than this client (42883: a function or
      // procedure it calls is missing, e.g. acta.enqueue_jobs_wake_early before it was migrated,
      // or has other arguments): say what to run.
      throw await verdict(err, tx !== undefined);
    }
    if (!tx) wake?.();
    return result.map((r, i) => {
      // Only possible if the job an idempotency key named was deleted during this very call.
      if (r.id === null) throw new ActaError('ACTA_ENQUEUE_RACE', `the job of idempotency key "${items[i].idempotencyKey}" vanished during enqueue; enqueue again`);
      return { id: r.id, created: r.created };
    });
  };
  /**
   * One statement about one job (getJob, cancel): options checked, the id as text (`none` when no
   * job can have it), and a missing schema reported as the migrator's verdict (schemaError).
   */
  const byId = async <T>(what: string, id: unknown, opts: { tx?: Queryable } | null | undefined, none: T, run: (q: Queryable | undefined, id: string) => Promise<T>): Promise<T> => {
    knownKeys(`${what} option`, optionsOf(what, opts), ['tx']);
    const text = jobIdText(id);
    if (text === null) return none;
    const tx = inTx(opts?.tx ?? undefined);
    try {
      return await run(tx, text);
    } catch (err) {
      throw await verdict(err, tx !== undefined);
    }
  };
  const followers = createFollowers({ ledger, namespace, scheduler: schedulerOption(options.scheduler, 'createClient') ?? asyncScheduler, verdict: (err) => verdict(err, false), wake });
  return {
    ...createAdmin({ db: options.db, ledger, namespace, verdict: (err) => verdict(err, false) }),
    why: (id: JobId | number | bigint) =>
      byId('why', id, undefined, null, (_tx, text) => {
        if (!options.db) throw new ConfigError('why: this client has a ledger and no database');
        return why(options.db, namespace, text);
      }),
    schedules: clientSchedules(options.db, namespace, known, options.force ?? false),
    // The ids' result types are the interface's (JobId<R>, a brand that exists only in types).
    enqueue: (async (definition: string | Definition<any, any>, payload: unknown, opts?: EnqueueOptions | null) => {
      const options = optionsOf('enqueue', opts); // null: no options, like undefined
      // A `definition` or `payload` among the options would replace the arguments' in the item.
      knownKeys('enqueue option', options, ENQUEUE_OPTION_KEYS);
      const { tx, ...rest } = options;
      const [result] = await enqueueItems([{ definition, payload, ...rest }], { tx }, false);
      return result;
    }) as Client['enqueue'],
    enqueueMany: (async (items: readonly EnqueueItem[], opts?: { tx?: Queryable } | null) => {
      // One item given bare, or a misspelt option (`txn`), would otherwise enqueue nothing or run outside the transaction.
      if (!Array.isArray(items)) throw new ConfigError(`enqueueMany takes an array of items, got ${shown(items)}`);
      knownKeys('enqueueMany option', optionsOf('enqueueMany', opts), ['tx']);
      return enqueueItems(items, opts ?? {}, true);
    }) as Client['enqueueMany'],
    getJob: <P, R>(id: JobId | number | bigint, opts?: { tx?: Queryable } | null) =>
      byId('getJob', id, opts, null, (tx, text) => (tx ? readJob(tx, namespace, text) : ledger.readJob(namespace, text)) as Promise<JobRecord<P, R> | null>),
    cancel: (id: JobId | number | bigint, opts?: { tx?: Queryable } | null) =>
      byId('cancel', id, opts, false, async (tx, text) => (await (tx ? cancelJob(tx, namespace, text) : ledger.cancelJob(namespace, text))) !== null),
    observe: followers.observe,
    result: followers.result,
    signal: createSignal({ ledger, namespace, inTx, verdict }),
    ...createPublish({ ledger, namespace, inTx, verdict }),
  };
}
