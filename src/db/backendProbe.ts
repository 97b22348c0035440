/*
 * Whether a server's backend is still running a statement whose answer a deadline gave up on
 * (DbUnansweredError.backendPid): asked on a new connection, itself bounded, so a silent network
 * (no answer to this either) and a slow statement on a server that answers are told apart
 * (test/cli.test.ts; test/faults/partition.test.ts keeps the silent network's "was not reached").
 */
import { Client } from 'pg';

/**
 * True when the server at `url` answers within `ms` that backend `pid` is active (running a
 * statement); false when it does not answer in time, fails, or says otherwise. The connection is
 * destroyed at the end either way: a silent one would otherwise hold the process until its
 * connect timeout.
 */
export async function backendStillRunning(url: string, pid: number, ms: number): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: ms, application_name: 'acta probe' });
  client.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  try {
    const asked = (async () => {
      await client.connect();
      const { rows } = await client.query<{ active: boolean }>("select state = 'active' as active from pg_stat_activity where pid = $1", [pid]);
      return rows[0]?.active === true;
    })();
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    return await Promise.race([asked.catch(() => false), late]);
  } finally {
    clearTimeout(timer);
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
}
