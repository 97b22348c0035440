/*
 * The deadline of `acta sql` and `acta migrate`, whose statements may rightly take long: a
 * `--deadline <s>` option each, longer than the other commands' 30 s (CLI_STATEMENT_DEADLINE_MS),
 * so a silent network still ends them, with what to do next (docs/operating.md, "Workers in
 * production"; test/faults/partition.test.ts).
 */
import { Option } from 'commander';
import { MAX_TIMER_MS } from '../../config';
import { cancelIfStillRunning } from '../../db/backendProbe';
import { type Db, withDeadline } from '../../db/Db';
import { DbUnansweredError } from '../../errors';
import { int } from './args';

/** `acta sql`'s default deadline, s: one statement (or one string of them) answered within it. */
export const SQL_DEADLINE_S = 300;

/**
 * `acta migrate`'s default deadline, s: for the whole migrate, which is one transaction (its wait
 * for another migrate's lock included); an index built in a migration takes minutes on tens of
 * millions of rows (docs/upgrading.md).
 */
export const MIGRATE_DEADLINE_S = 3_600;

/** `--deadline <s>`: an integer of seconds, 0 for none, within a timer's range. */
export function deadlineOption(what: string, defaultS: number): Option {
  return new Option('--deadline <s>', `${what} must be answered within this many seconds, else the command fails (0: no deadline)`).argParser(int(0, Math.floor(MAX_TIMER_MS / 1_000))).default(defaultS);
}

/** How long the server may take to say whether it still runs a statement past its deadline, and to confirm its cancel, ms. */
const PROBE_MS = 3_000;

/**
 * `fn` on `db` with every call within `seconds` (none for 0): a call unanswered by then fails as
 * DbUnansweredError, its connection dropped (withDeadline), its message ending with `advice`. On a
 * server whose connection had been made, a new connection asks whether the statement is still
 * running there, and cancels it if so (a cancel rolls back its transaction: all of `acta migrate`,
 * one transaction), waiting within the same budget until it stops: the error then says it was
 * running (stillRunning) and whether it was cancelled (cancelled) or may still finish, where a
 * slow statement was reported as a database not reached; a silent network answers that neither,
 * and keeps its message.
 */
export async function withinDeadline<T>(db: Db, seconds: number, advice: string, fn: (db: Db) => Promise<T>): Promise<T> {
  try {
    return await fn(seconds === 0 ? db : withDeadline(db, seconds * 1_000));
  } catch (err) {
    if (!(err instanceof DbUnansweredError)) throw err;
    const url = process.env.DATABASE_URL;
    const verdict = err.holder === undefined && err.backendPid !== undefined && url ? await cancelIfStillRunning(url, err.backendPid, PROBE_MS) : 'idle';
    throw new DbUnansweredError(err.deadlineMs, advice, { cause: err, holder: err.holder, backendPid: err.backendPid, stillRunning: verdict !== 'idle', cancelled: verdict === 'cancelled' });
  }
}
