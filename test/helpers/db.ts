import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createPgDb } from '../../src/db/pgDb';
import type { Db } from '../../src/db/Db';
import { migrate } from '../../src/db/migrator';

/** The server the suites run against (set by globalSetup or by the caller). */
export function serverUrl(): string {
  const url = process.env.ACTA_TEST_DATABASE_URL;
  if (!url) throw new Error('ACTA_TEST_DATABASE_URL is not set: the jest globalSetup sets it');
  return url;
}

/** `url` with its database name replaced. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** A database of its own for one test file: created empty, dropped by `drop()`. */
export interface TestDatabase {
  url: string;
  name: string;
  /** Opens a Db on it (closed by drop()). */
  open(options?: { max?: number }): Db;
  drop(): Promise<void>;
}

export async function createTestDatabase(options: { migrate?: boolean; server?: string } = {}): Promise<TestDatabase> {
  const server = options.server ?? serverUrl();
  const name = `acta_test_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
    // The claim's resumed scan starts after a pick slower than 5 ms (sql/functions/claim_jobs.sql,
    // "Resumed scan"): under a loaded test run it would start at random and change the idle answer
    // and which rows a session's next claims see. Off by default here, as on PGlite; its rules are
    // test/db/resumedClaim.test.ts's, whose sessions set it themselves.
    await admin.query(`alter database ${name} set acta.claim_resume_after_ms = 'Infinity'`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(server, name);
  const opened: Db[] = [];
  const open = (o: { max?: number } = {}) => {
    const db = createPgDb({ connectionString: url, max: o.max });
    opened.push(db);
    return db;
  };
  if (options.migrate !== false) {
    const db = createPgDb({ connectionString: url, max: 1 });
    await migrate(db);
    await db.close();
  }
  return {
    url,
    name,
    open,
    async drop() {
      await Promise.all(opened.map((db) => db.close().catch(() => undefined)));
      const admin = new Client({ connectionString: server });
      await admin.connect();
      try {
        await admin.query(`drop database if exists ${name} with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** Runs `fn` with a `pg` client of its own on `url` (e.g. a caller's transaction for `{ tx }`), connected, and ended whatever happens. */
export async function withPgClient<T>(url: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * The lifecycle most database test files share: beforeAll creates a migrated database of the
 * file's own and opens one Db on it; afterAll drops it. The returned handles are filled in by
 * beforeAll: use them inside tests and hooks.
 */
export function useTestDatabase(options: { timeoutMs?: number } = {}): { db: Db; tdb: TestDatabase } {
  const tdb = {} as TestDatabase;
  const db = {} as Db;
  beforeAll(async () => {
    Object.assign(tdb, await createTestDatabase());
    Object.assign(db, tdb.open());
  }, options.timeoutMs);
  afterAll(async () => {
    if (tdb.drop) await tdb.drop();
  });
  return { db, tdb };
}

