import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ActaError, ConfigError, EmbeddedShareClosedError, SchemaNewerError, SchemaNotMigratedError } from '../errors';
import type { Db, Queryable } from './Db';

/** pg_advisory_xact_lock key of the migrator: "acta" in ASCII, so it is recognisable in pg_locks. */
export const MIGRATION_LOCK_KEY = 0x61637461;

/** One SQL file the migrator applies: a numbered migration (once) or a function (when it changed). */
export interface SqlFile {
  /** `migrations/0001_core.sql` or `functions/claim_jobs.sql` (a function file is named after the one function it defines). */
  name: string;
  text: string;
  checksum: string;
}

/** Finds the package's `sql/` folder (from src/ under ts, or dist/src/ once built). */
export function sqlDir(): string {
  let dir = __dirname;
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, 'sql');
    if (fs.existsSync(path.join(candidate, 'migrations'))) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error(`acta: cannot find the sql/ folder above ${__dirname}`);
}

/** Migrations in number order, then functions in name order. */
export function loadSqlFiles(dir = sqlDir()): SqlFile[] {
  const read = (sub: string) =>
    fs
      .readdirSync(path.join(dir, sub))
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .map((f) => {
        const text = fs.readFileSync(path.join(dir, sub, f), 'utf8');
        return { name: `${sub}/${f}`, text, checksum: createHash('sha256').update(text).digest('hex') };
      });
  return [...read('migrations'), ...read('functions')];
}

const BOOTSTRAP = `
create schema if not exists acta;
create table if not exists acta.migrations (
  name        text primary key,
  checksum    text not null,
  applied_at  timestamptz not null default now()
)`;

/**
 * sql/functions.lock, written by `npm run sql:lock` (scripts/lock-functions.js): the revision of the
 * function files and the checksums it stands for. The revision goes up whenever a function file
 * changes (test/db/migrator.test.ts fails until the lock matches the files), so that a change of
 * function files alone, with no new migration, still tells an older acta it is older.
 */
export interface FunctionsLock {
  revision: number;
  checksums: Record<string, string>;
}

export function loadFunctionsLock(dir = sqlDir()): FunctionsLock {
  const lock = JSON.parse(fs.readFileSync(path.join(dir, 'functions.lock'), 'utf8')) as FunctionsLock;
  if (!Number.isInteger(lock.revision) || lock.revision < 1) throw new Error(`acta: sql/functions.lock has no valid revision`);
  return lock;
}

/**
 * The acta.migrations row holding the functions' revision that last migrated the database (the
 * number, as text, in its checksum column). Absent: migrated before revisions were recorded (0).
 * Builds from before it ignore the row.
 */
export const REVISION_ROW = 'functions/revision';

/**
 * Throws SchemaNewerError when the database records a migration that `files` does not hold, or
 * function files of a higher revision than `revision`.
 */
function refuseNewer(applied: Map<string, string>, files: SqlFile[], revision: number): void {
  const known = new Set(files.map((f) => f.name));
  const unknown = [...applied.keys()].filter((name) => name.startsWith('migrations/') && !known.has(name)).sort();
  const recorded = applied.get(REVISION_ROW);
  const recordedRevision = recorded === undefined ? 0 : Number(recorded);
  // Not a number (written by hand?): not known to be older, so not overwritten.
  if (!Number.isInteger(recordedRevision) || recordedRevision > revision) {
    unknown.push(`SQL functions of revision ${recorded} (this acta's are revision ${revision})`);
  }
  if (unknown.length > 0) throw new SchemaNewerError(unknown);
}

/**
 * Brings the schema up to date in one transaction, under an advisory lock so many workers may
 * start at once: each numbered migration is applied once (forward-only: a changed checksum of an
 * applied one is reported, never re-run); each function file is (re)applied when its checksum
 * differs from the recorded one; the functions' `revision` (sql/functions.lock) is recorded.
 * Returns the names applied this time. Throws SchemaNewerError, changing nothing, when the
 * database holds a migration this build does not know or functions of a higher revision (a newer
 * acta migrated it: this build's function files are older).
 */
export async function migrate(db: Db, files = loadSqlFiles(), revision = loadFunctionsLock().revision): Promise<string[]> {
  // The files are acta's own (tests give others): an options object here is a caller's slip.
  if (!Array.isArray(files)) throw new ConfigError(`migrate takes the database only: migrate(db); got a second argument of type ${typeof files}`);
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrateOnce(db, files, revision);
    } catch (err) {
      // The embedded folder's holder exited while this transaction waited behind it or ran in its
      // session: it ended with that session (or committed, and the next try finds it applied), and
      // the Db opens the folder again at its next call. So `acta migrate` stays safe from many
      // processes at once on PGlite too (docs/operating.md; test/embeddedShare.test.ts).
      if (!(err instanceof EmbeddedShareClosedError) || attempt >= MIGRATE_TRIES) throw err;
    }
  }
}

/** Tries of a migrate whose embedded holder went away: each try outlives one holder. */
const MIGRATE_TRIES = 10;

async function migrateOnce(db: Db, files: SqlFile[], revision: number): Promise<string[]> {
  try {
    return await inTransaction(db, files, revision);
  } catch (err) {
    // 42501, insufficient_privilege: PostgreSQL's message names the object, not what to do. The
    // role is asked once the transaction has ended (it may hold the pool's last connection).
    if ((err as { code?: unknown }).code !== '42501') throw err;
    throw new ActaError('ACTA_MIGRATE_PRIVILEGE', `role ${await currentRole(db)} may not change the acta schema (${(err as Error).message}): run acta migrate as the role that owns it (for a new schema, one that may create in the database)`, { cause: err });
  }
}

function inTransaction(db: Db, files: SqlFile[], revision: number): Promise<string[]> {
  return db.transaction(async (tx) => {
    // Read committed whatever the server's default: a snapshot taken before the lock (repeatable
    // read) would miss what a concurrent migrate committed, and replay it.
    await tx.query('set transaction isolation level read committed');
    await tx.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    // Only when missing: `create schema if not exists` needs CREATE on the database even when
    // the schema is there, and an application's role running migrate on a current schema would
    // fail for nothing (test/db/migrator.test.ts, "a role that may use the acta schema").
    const { rows } = await tx.query<{ present: boolean }>(`select to_regclass('acta.migrations') is not null as present`);
    if (!rows[0]?.present) await tx.query(BOOTSTRAP);
    const applied = await recorded(tx);
    refuseNewer(applied, files, revision);
    const done: string[] = [];
    for (const file of files) {
      const checksum = applied.get(file.name);
      if (checksum === file.checksum) continue;
      if (checksum !== undefined && file.name.startsWith('migrations/')) {
        throw new ActaError('ACTA_MIGRATION_CHANGED', `migration ${file.name} differs from the one applied to this database (its checksum); migrations are forward-only: run the acta build that applied it, or check the file was not changed (line endings included)`);
      }
      await tx.query(file.text);
      await record(tx, file.name, file.checksum);
      done.push(file.name);
    }
    if (applied.get(REVISION_ROW) !== String(revision)) await record(tx, REVISION_ROW, String(revision));
    return done;
  });
}

/** The session's role, for a message; '?' when even that cannot be read. */
async function currentRole(db: Db): Promise<string> {
  return db.query<{ role: string }>('select current_user as role').then(({ rows }) => rows[0]?.role ?? '?', () => '?');
}

/** Records (or re-records) one row of acta.migrations: a file applied, or the functions' revision. */
async function record(q: Queryable, name: string, checksum: string): Promise<void> {
  await q.query(
    `insert into acta.migrations (name, checksum) values ($1, $2)
     on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`,
    [name, checksum],
  );
}

async function recorded(q: Queryable): Promise<Map<string, string>> {
  const { rows } = await q.query<{ name: string; checksum: string }>('select name, checksum from acta.migrations');
  return new Map(rows.map((r) => [r.name, r.checksum]));
}

/**
 * Throws SchemaNotMigratedError unless every migration and function of this build is applied
 * as recorded, and SchemaNewerError when the database holds a migration this build does not
 * know or functions of a higher revision than `revision`. Workers call it before they start.
 */
export async function assertMigrated(db: Queryable, files = loadSqlFiles(), revision = loadFunctionsLock().revision): Promise<void> {
  const { rows } = await db.query<{ present: boolean }>(`select to_regclass('acta.migrations') is not null as present`);
  if (!rows[0]?.present) throw new SchemaNotMigratedError('no acta.migrations table');
  const applied = await recorded(db);
  refuseNewer(applied, files, revision);
  const missing = files.filter((f) => applied.get(f.name) !== f.checksum).map((f) => f.name);
  if (missing.length > 0) throw new SchemaNotMigratedError(`not applied or out of date: ${missing.join(', ')}`);
}
