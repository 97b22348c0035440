import { Observable, type SchedulerLike, share, type Subscription } from 'rxjs';
import { knownKeys, optionsOf } from '../config';
import { isTransientDbError } from '../db/transient';
import type { JobId, JobRecord } from '../db/types';
import { ConfigError, DbClosedError, JobCancelledError, JobDeletedError, JobFailedError, JobNotFoundError, ResultTimeoutError } from '../errors';
import type { Ledger } from '../ledger';
import { jobIdText, shown } from './jobId';

/** Options of client.observe. */
export interface ObserveOptions {
  /** Unsubscribing before the job ended cancels it (client.cancel: a Ready job at once, a running one through its worker). `true` or `false` (default). */
  cancelOnUnsubscribe?: boolean;
  /** The backstop poll, ms: the job is read this often even if no NOTIFY arrives (an integer ≥ 10). Default 5,000. */
  pollMs?: number;
}

/** Options of client.result. */
export interface ResultOptions {
  /** Rejects with ResultTimeoutError once this many ms passed before the job ended (the job is left as it is). Default: waits as long as it takes. */
  timeoutMs?: number;
  /** The backstop poll, ms (ObserveOptions.pollMs). */
  pollMs?: number;
}

/** What a client's followers need of it. */
export interface FollowDeps {
  ledger: Ledger;
  namespace: string;
  /** The clock of the poll and of result's timeout. */
  scheduler: SchedulerLike;
  /** The error to end a follower with for a failed read (the migrator's verdict: schemaError). */
  verdict(err: unknown): Promise<unknown>;
  /** The client's publishWakeup for this namespace, if it has one (Redis). */
  wake?: () => void;
}

/** The default backstop poll of observe, ms. */
const OBSERVE_POLL_MS = 5_000;

/** What an observer emits on: the fields whose change is a new state (migration 0009's trigger watches the same). */
const stateKey = (r: JobRecord): string =>
  JSON.stringify([r.status, r.execution, r.attempts, r.progress, r.cancelRequestedAt?.getTime() ?? null, r.runAt.getTime()]);

const ignore = () => undefined;

/** Checked options of one follower; `onOutage` (result's own) hears each read that failed transiently. */
interface Follow {
  text: string | null;
  /** The id as given, for JobNotFoundError when no job can have it. */
  name: string;
  pollMs: number;
  cancelOnUnsubscribe: boolean;
  onOutage?: () => void;
}

function pollOption(what: string, ms: unknown): number {
  if (ms === undefined) return OBSERVE_POLL_MS;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 10 || ms > 2 ** 31 - 1) throw new ConfigError(`${what}: pollMs must be an integer of ms from 10, got ${shown(ms)}`);
  return ms;
}

/**
 * client.observe and client.result (docs/reference.md, "observe"; docs/rx.md, "A job as an
 * Observable"). A follower rides out what src/db/transient.ts calls transient (a restart, a lost
 * connection): the read is made again at the next poll or LISTEN reconnect, until the job ends or
 * result's timeout (test/faults/followers.test.ts). A Db closed under it ends it with
 * DbClosedError; nothing it started is left to reject unheard (test/pglite.test.ts).
 */
export function createFollowers(deps: FollowDeps) {
  const { ledger, namespace, scheduler } = deps;
  /**
   * Ids of watched jobs that changed (NOTIFY acta_job), and '*' each time LISTEN is in effect
   * (anything may have changed while it was not): one LISTEN for all of this client's observers,
   * from the first one's subscription to the last one's end. Errors with DbClosedError when the
   * Db closes.
   */
  const changes$ = new Observable<string>((subscriber) => {
    let stop: (() => Promise<void>) | undefined;
    let closed = false;
    ledger
      .listen('acta_job', {
        onNotify: (id) => subscriber.next(id),
        onConnect: () => subscriber.next('*'),
        onClosed: () => subscriber.error(new DbClosedError()),
      })
      .then(
        (unlisten) => {
          if (closed) unlisten().catch(ignore);
          else stop = unlisten;
        },
        (err: unknown) => {
          // No LISTEN: the poll follows the job, unless the Db is closed.
          if (err instanceof DbClosedError) subscriber.error(err);
        },
      );
    return () => {
      closed = true;
      stop?.().catch(ignore);
    };
  }).pipe(share());

  /** Reads the job until it ends; see createFollowers. */
  const follow = <P, R>(args: () => Follow) =>
    new Observable<JobRecord<P, R>>((subscriber) => {
      let follow: Follow;
      try {
        follow = args();
      } catch (err) {
        subscriber.error(err);
        return;
      }
      const { text, name, pollMs, cancelOnUnsubscribe, onOutage } = follow;
      if (text === null) {
        subscriber.error(new JobNotFoundError(name));
        return;
      }
      let ended = false;
      /** A watch or a read found the job: its absence later means it was deleted. */
      let found = false;
      let lastKey: string | undefined;
      /** watchJob answered true: the job's changes send NOTIFY from now on. */
      let watched = false;
      /** The read after the first watch: a Ready job there gets the client's own wakeup (see watch). */
      let firstRead = true;
      let watching = false;
      let reading = false;
      let again = false;
      const fail = (err: unknown) => {
        ended = true;
        subscriber.error(err);
      };
      /** A failed call: a transient one waits for the next poll or reconnect; any other ends the follower. */
      const failed = async (err: unknown) => {
        if (ended) return;
        if (isTransientDbError(err)) return onOutage?.();
        let verdict: unknown;
        try {
          verdict = await deps.verdict(err);
        } catch (e) {
          verdict = e;
        }
        if (!ended) fail(verdict);
      };
      /**
       * The job is not there. Found since it was watched: deleted by the pass or deleteJobs
       * (a completion keeps a watched row). Otherwise JobDeletedError 'retentionZero' when the
       * namespace deletes a job at its success and the id was issued (a success before the watch:
       * docs/retention.md, "Retention zero"), 'whileFollowed' when an earlier read found it,
       * JobNotFoundError when none of that holds or the question goes unanswered
       * (test/db/followDeleted.test.ts).
       */
      const absent = () => {
        if (ended) return;
        if (watched) return fail(new JobDeletedError(text, 'whileFollowed'));
        ended = true;
        const seen = found;
        ledger.readAbsence(namespace, text).then(
          (why) =>
            subscriber.error(
              why.retentionZero && (why.issued || seen) ? new JobDeletedError(text, 'retentionZero') : seen ? new JobDeletedError(text, 'whileFollowed') : new JobNotFoundError(text),
            ),
          () => subscriber.error(seen ? new JobDeletedError(text, 'whileFollowed') : new JobNotFoundError(text)),
        );
      };
      /** One read at a time; a trigger during a read reads once more after it. */
      const read = () => {
        if (ended) return;
        if (reading) {
          again = true;
          return;
        }
        reading = true;
        ledger.readJob(namespace, text).then(
          (job) => {
            reading = false;
            if (ended) return;
            if (job === null) return absent();
            found = true;
            if (firstRead && watched) {
              firstRead = false;
              if (job.status === 'ready' && job.blockedBy === null) deps.wake?.();
            }
            const key = stateKey(job);
            if (key !== lastKey) {
              lastKey = key;
              subscriber.next(job as JobRecord<P, R>);
            }
            if (job.status === 'succeeded') {
              ended = true;
              subscriber.complete();
            } else if (job.status === 'failed') fail(new JobFailedError(text, job.error));
            else if (job.status === 'cancelled') fail(new JobCancelledError(text));
            else if (again) {
              again = false;
              read();
            }
          },
          (err: unknown) => {
            reading = false;
            again = false;
            return failed(err);
          },
        );
      };
      /**
       * Marks the job watched (until that answers, once at a time), then reads it. The mark locks
       * the row for a moment, and a claim meanwhile skips it and sleeps up to its safety poll:
       * watch_job then NOTIFYs the namespace, and the client's publishWakeup (Redis: workers that
       * do not LISTEN) is sent when the first read finds the job Ready (test/db/observe.test.ts,
       * "a claim that skipped the row a watch held").
       */
      const watch = () => {
        if (ended || watching) return;
        watching = true;
        ledger.watchJob(namespace, text).then(
          (exists) => {
            watching = false;
            if (ended) return;
            if (!exists) return absent();
            found = watched = true;
            read();
          },
          (err: unknown) => {
            watching = false;
            return failed(err);
          },
        );
      };
      /** A poll or a NOTIFY: the job may have changed (and a watch an outage failed is made again). */
      const trigger = () => {
        if (!watched) watch();
        read();
      };
      const changes = changes$.subscribe({
        next: (changed) => {
          if (changed === text || changed === '*') trigger();
        },
        error: (err: unknown) => {
          if (!ended) fail(err);
        },
      });
      const poll: Subscription = scheduler.schedule(function (this: { schedule(state?: unknown, delay?: number): unknown }) {
        trigger();
        this.schedule(undefined, pollMs);
      }, pollMs);
      watch();
      return () => {
        changes.unsubscribe();
        poll.unsubscribe();
        if (!ended && cancelOnUnsubscribe) ledger.cancelJob(namespace, text).catch(ignore);
        ended = true;
      };
    });

  const observe = <P, R>(id: JobId | number | bigint, opts?: ObserveOptions, onOutage?: () => void): Observable<JobRecord<P, R>> =>
    follow<P, R>(() => {
      knownKeys('observe option', optionsOf('observe', opts), ['cancelOnUnsubscribe', 'pollMs']);
      const cancel = opts?.cancelOnUnsubscribe;
      if (cancel !== undefined && typeof cancel !== 'boolean') throw new ConfigError(`observe: cancelOnUnsubscribe must be true or false, got ${shown(cancel)}`);
      return { pollMs: pollOption('observe', opts?.pollMs), cancelOnUnsubscribe: cancel === true, text: jobIdText(id), name: String(id), onOutage };
    });

  const result = <R>(id: JobId | number | bigint, opts?: ResultOptions): Promise<R> => {
    try {
      knownKeys('result option', optionsOf('result', opts), ['timeoutMs', 'pollMs']);
      const timeoutMs = opts?.timeoutMs;
      if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0 && timeoutMs <= 2 ** 31 - 1)) {
        throw new ConfigError(`result: timeoutMs must be a number of ms from 0 to 2^31-1, got ${shown(timeoutMs)}`);
      }
      return new Promise<R>((resolve, reject) => {
        let last: JobRecord<unknown, R> | undefined;
        let timer: Subscription | undefined;
        let expired = false;
        /** A read failed transiently and none has answered since (an outage). */
        let outage = false;
        const timedOut = () => {
          sub.unsubscribe();
          reject(new ResultTimeoutError(String(id), timeoutMs as number));
        };
        const states = observe<unknown, R>(id, { pollMs: opts?.pollMs }, () => {
          outage = true;
          // The timeout waited for the first read, which the outage failed: no answer is coming.
          if (expired) timedOut();
        });
        const sub: Subscription = states.subscribe({
          next: (job) => {
            last = job;
            outage = false;
            // The timeout ran out before the first read answered: a job that has not ended now
            // ends the wait (one that has is answered by complete or error next).
            if (expired && job.status !== 'succeeded' && job.status !== 'failed' && job.status !== 'cancelled') timedOut();
          },
          error: (err: unknown) => {
            timer?.unsubscribe();
            reject(err);
          },
          complete: () => {
            timer?.unsubscribe();
            resolve(last?.result as R);
          },
        });
        if (timeoutMs !== undefined && !sub.closed) {
          timer = scheduler.schedule(() => {
            // A job that ended is answered whatever the timeout: wait for the first read, unless
            // the database is away.
            if (last === undefined && !outage) expired = true;
            else timedOut();
          }, timeoutMs);
        }
      });
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return { observe: <P, R>(id: JobId | number | bigint, opts?: ObserveOptions) => observe<P, R>(id, opts), result };
}
