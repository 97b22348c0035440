/*
 * The operations of a team running acta (docs/operating.md, "Admin operations"): list, retry,
 * cancel and delete jobs, see the workers and namespaces, pause and resume. Each is one statement
 * with its values as parameters (a filter's bulk operation: one statement per bounded batch), along
 * jobs_list_idx (migration 0015; test/db/admin.test.ts reads the plans).
 *
 * createAdmin composes them: listJobs.ts (the listing and its filter), bulkOperations.ts (retry,
 * cancel, delete), fleetReads.ts (workers, namespaces, alerts); pause and resume, on the ledger, here.
 */
import * as os from 'node:os';
import { knownKeys, MAX_NAME_BYTES, nameOption, optionsOf } from '../config';
import type { Db } from '../db/Db';
import type { PauseAnswer } from '../db/pauses';
import type { AlertInfo } from '../db/alerts';
import type { JobId } from '../db/types';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { bulkOperations, type JobSelection } from './bulkOperations';
import { type AlertsOptions, fleetReads, type NamespaceInfo, type WorkerInfo } from './fleetReads';
import { type JobPage, listJobs, type ListJobsOptions } from './listJobs';

export interface Admin {
  /**
   * Stops the claims of the namespace (default the client's) or of one definition, fleet-wide, within
   * one wakeup, workers started later included; running attempts finish (acta.pause). `by` default:
   * user@host of this process. Resolves the pause that stands (a scope paused already keeps its
   * first who, why and since: `created` false).
   */
  pause(options?: { namespace?: string; definition?: string; reason?: string; by?: string }): Promise<PauseAnswer>;
  /** Lifts that scope's pause and wakes its workers at once; true when it was paused. A namespace's resume leaves its definitions' pauses. */
  resume(options?: { namespace?: string; definition?: string }): Promise<boolean>;
  /** Lists jobs newest first by keyset: pass `nextCursor` back as `cursor`. Throws ConfigError for a bad filter. */
  listJobs(options?: ListJobsOptions): Promise<JobPage>;
  /**
   * Retries Failed or Cancelled jobs: each becomes Ready, due now, with a fresh attempt budget
   * (attempts and uncharged returns 0; every earlier attempt stays in the attempt ledger and the
   * fence goes on from its execution number), its result, finish time and cancel request cleared,
   * its last error kept until the next attempt ends. A filter retries its Failed jobs (Cancelled
   * ones when its status says so), in batches of 500. Wakes the namespace. Resolves the ids retried.
   */
  retryJobs(selection: JobSelection): Promise<JobId[]>;
  /**
   * Cancels jobs as client.cancel does, each (a filter: its Ready, Waiting and Executing jobs, in
   * batches). `{}` (every job of the namespace) is refused unless given as `{ all: true }`; so for
   * retryJobs and deleteJobs.
   */
  cancelJobs(selection: JobSelection): Promise<{ cancelled: JobId[]; requested: JobId[] }>;
  /** Deletes finished jobs (Succeeded, Failed, Cancelled) with their steps, signals and attempts (acta.delete_jobs). Others are left: cancel them first. */
  deleteJobs(selection: JobSelection): Promise<JobId[]>;
  /** The namespace's workers, newest first: every live one, and the stopped and dead of the last day. */
  listWorkers(options?: { namespace?: string }): Promise<WorkerInfo[]>;
  /** Every namespace (with a worker, a pause, or a job Ready, Waiting, Failed or Cancelled) with its jobs counted by status (each up to 100,000), its oldest due job's wait and its pauses. */
  namespaces(): Promise<NamespaceInfo[]>;
  /**
   * The namespace's alerts as sys.alerts left them in acta.alerts (docs/alerts.md): the open ones
   * (resolvedAt null), most recently raised first; with `all`, then the resolved ones still kept
   * (a day by default). At most `limit`, 1 to 1,000 (default 500). Read only: a namespace whose
   * workers do not run sys.alerts has none.
   */
  alerts(options?: AlertsOptions): Promise<AlertInfo[]>;
}

/** What the parts of createAdmin share: the client's namespace and its way to the database. */
export interface AdminContext {
  namespace: string;
  /** The namespace an option names (checked), or the client's when none. */
  nsOf: (ns: unknown) => string;
  /** The client's database; a ConfigError naming `what` for a client with a ledger and no database. */
  dbOf: (what: string) => Db;
  /** Runs a call, throwing the client's verdict on what it throws. */
  run: <T>(fn: () => Promise<T>) => Promise<T>;
}

/** The admin operations of a client of `namespace` (src/client/client.ts delegates to them). */
export function createAdmin(context: { db?: Db; ledger: Ledger; namespace: string; verdict: (err: unknown) => Promise<unknown> }): Admin {
  const { ledger } = context;
  const nsOf = (ns: unknown) => (ns === undefined ? context.namespace : nameOption('namespace', ns, MAX_NAME_BYTES));
  const dbOf = (what: string): Db => {
    if (!context.db) throw new ConfigError(`${what}: this client has a ledger and no database`);
    return context.db;
  };
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw await context.verdict(err);
    }
  };
  const byDefault = (() => {
    try {
      return `${os.userInfo().username}@${os.hostname()}`;
    } catch {
      return os.hostname();
    }
  })();
  const shared: AdminContext = { namespace: context.namespace, nsOf, dbOf, run };
  return {
    pause: async (given) => {
      const options = optionsOf('pause', given);
      knownKeys('pause option', options, ['namespace', 'definition', 'reason', 'by']);
      const scope = { namespace: nsOf(options.namespace), definition: options.definition === undefined ? null : nameOption('definition', options.definition, MAX_NAME_BYTES) };
      const text = (what: string, v: unknown) => {
        if (v === undefined) return undefined;
        if (typeof v !== 'string' || v.length > 1_000 || v.includes('\u0000')) throw new ConfigError(`pause: ${what} must be a string of at most 1,000 characters without \\u0000`);
        // Who paused is what an operator reads to ask why: left out it is user@host, never blank.
        if (what === 'by' && v.trim() === '') throw new ConfigError('pause: by must name who pauses (left out: user@host), got a blank string');
        return v;
      };
      return run(() => ledger.pause({ ...scope, by: text('by', options.by) ?? byDefault, reason: text('reason', options.reason) ?? null }));
    },
    resume: async (given) => {
      const options = optionsOf('resume', given);
      knownKeys('resume option', options, ['namespace', 'definition']);
      return run(() => ledger.resume({ namespace: nsOf(options.namespace), definition: options.definition === undefined ? null : nameOption('definition', options.definition, MAX_NAME_BYTES) }));
    },
    listJobs: listJobs(shared),
    ...bulkOperations(shared),
    ...fleetReads(shared),
  };
}
