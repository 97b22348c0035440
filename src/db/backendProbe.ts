/*
 * A statement whose answer a deadline gave up on (DbUnansweredError.backendPid), asked about on a
 * new connection, itself bounded, so a silent network (no answer to this either) and a slow
 * statement on a server that answers are told apart (test/cli.test.ts; test/faults/partition.test.ts
 * keeps the silent network's "was not reached"). A backend still running it is cancelled there: the
 * command failed, so its statement must not commit afterwards (docs/operating.md, "Workers in
 * production").
 */
import { Client } from 'pg';

/**
 * What the server said of the backend: `idle` not running a statement (or no answer in time, or
 * it failed); `cancelled` it was running one, was cancelled (pg_cancel_backend, which rolls back its
 * transaction) and is no longer running it; `running` it was running one and the cancel was not
 * confirmed within the budget, so the statement may still finish there.
 */
export type BackendVerdict = 'idle' | 'running' | 'cancelled';

/** How often the backend is asked again whether the cancel has taken, ms. */
const POLL_MS = 50;

/**
 * Asks the server at `url`, within `ms` in all, whether backend `pid` is active (running a
 * statement), and if so cancels it and waits, within the same `ms`, until it is no longer active.
 * A cancel that reaches a backend already idle is ignored there. The connection is destroyed at
 * the end either way: a silent one would otherwise hold the process until its connect timeout.
 */
export async function cancelIfStillRunning(url: string, pid: number, ms: number): Promise<BackendVerdict> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: ms, application_name: 'acta probe' });
  client.on('error', () => undefined);
  const until = Date.now() + ms;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  try {
    const asked = (async (): Promise<BackendVerdict> => {
      await client.connect();
      const { rows } = await client.query<{ active: boolean }>("select state = 'active' as active from pg_stat_activity where pid = $1", [pid]);
      if (rows[0]?.active !== true) return 'idle';
      running = true;
      // A cancel refused (another role's backend) or lost leaves it running.
      const cancel = await client.query<{ sent: boolean }>('select pg_cancel_backend($1) as sent', [pid]);
      if (cancel.rows[0]?.sent !== true) return 'running';
      while (Date.now() < until) {
        const still = await client.query("select 1 from pg_stat_activity where pid = $1 and state = 'active'", [pid]);
        if (still.rows.length === 0) return 'cancelled';
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
      return 'running';
    })();
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
    const verdict = await Promise.race([asked.catch(() => 'late' as const), late]);
    // Unanswered in time: still running if the server had said it was running it, else not known.
    return verdict === 'late' ? (running ? 'running' : 'idle') : verdict;
  } finally {
    clearTimeout(timer);
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
}
