/** The orchestrator's PostgreSQL administration: databases per run, statistics, server facts. */
import { Client } from 'pg';
import { sleep } from './stats';

/** `url` with its database name replaced. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const ident = (name: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
  return name;
};

/** One connection to the server's maintenance database, for CREATE/DROP DATABASE and pg_stat_*. */
export class Admin {
  private constructor(
    readonly url: string,
    private readonly client: Client,
  ) {}

  static async open(url: string): Promise<Admin> {
    const client = new Client({ connectionString: url, application_name: 'acta-bench-admin' });
    await client.connect();
    client.on('error', () => undefined);
    return new Admin(url, client);
  }

  query<R extends Record<string, unknown> = Record<string, unknown>>(text: string, params?: unknown[]) {
    return this.client.query<R>(text, params);
  }

  async createDatabase(name: string, template?: string): Promise<void> {
    // A template being copied must have no other session; a session still closing may linger a moment.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.client.query(`create database ${ident(name)}${template ? ` template ${ident(template)}` : ''}`);
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (template && code === '55006' && attempt < 50) {
          await sleep(100);
          continue;
        }
        throw err;
      }
    }
  }

  async dropDatabase(name: string): Promise<void> {
    await this.client.query(`drop database if exists ${ident(name)} with (force)`);
  }

  /**
   * CHECKPOINT before a measured phase: the setup's dirty pages (a 100,000-job enqueue writes
   * ~100 MB of WAL) are flushed now, not by a checkpoint that max_wal_size starts during the drain
   * of whichever run crosses it. Without the privilege (a role neither superuser nor
   * pg_checkpoint) it is skipped, and `checkpointRefused` is set.
   */
  async checkpoint(): Promise<void> {
    if (this.checkpointRefused) return;
    try {
      await this.client.query('checkpoint');
    } catch (err) {
      if ((err as { code?: string }).code !== '42501') throw err;
      this.checkpointRefused = true;
    }
  }

  /** CHECKPOINT was refused once (42501): not tried again. */
  checkpointRefused = false;

  /** Waits until no session is connected to `database` (their statistics are flushed when they exit). */
  async waitNoBackends(database: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { rows } = await this.client.query<{ n: string }>('select count(*) as n from pg_stat_activity where datname = $1', [database]);
      if (Number(rows[0].n) === 0) return;
      if (Date.now() > deadline) throw new Error(`sessions still connected to ${database} after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  /** Committed and rolled-back transactions of `database` so far (flushed statistics only). */
  async xacts(database: string): Promise<{ commit: number; rollback: number }> {
    await this.client.query('select pg_stat_clear_snapshot()');
    const { rows } = await this.client.query<{ c: string; r: string }>(
      'select xact_commit as c, xact_rollback as r from pg_stat_database where datname = $1',
      [database],
    );
    return { commit: Number(rows[0]?.c ?? 0), rollback: Number(rows[0]?.r ?? 0) };
  }

  async serverFacts(): Promise<Record<string, string>> {
    const facts: Record<string, string> = {};
    const { rows } = await this.client.query<{ v: string }>('select version() as v');
    facts.version = rows[0].v;
    for (const name of ['server_version', 'shared_buffers', 'fsync', 'synchronous_commit', 'wal_level', 'autovacuum', 'max_connections', 'work_mem', 'jit']) {
      const r = await this.client.query<Record<string, string>>(`show ${name}`);
      facts[name] = Object.values(r.rows[0])[0];
    }
    return facts;
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

/** A plain connection to one database. */
export async function connectTo(url: string, applicationName = 'acta-bench'): Promise<Client> {
  const client = new Client({ connectionString: url, application_name: applicationName });
  await client.connect();
  client.on('error', () => undefined);
  return client;
}

/**
 * Seeded succeeded rows as a completion leaves them (migration 0023): in acta.succeeded_jobs, the
 * row its attempt's record (no acta.executions row for it).
 */
export async function moveSucceeded(db: { query(sql: string): Promise<unknown> }): Promise<void> {
  await db.query(`with moved as (delete from acta.jobs where status = 'succeeded' returning *)
                  insert into acta.succeeded_jobs select * from moved`);
}
