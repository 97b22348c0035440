import * as path from 'node:path';
import type { Db } from './Db';
import { createPgDb } from './pgDb';
import { createPgliteDb } from './pgliteDb';

/** Where the embedded default keeps its data when nothing else is said: `./.acta/data`. */
export const DEFAULT_DATA_DIR = path.join('.acta', 'data');

/**
 * Opens the database a process was pointed at: `url` (else `DATABASE_URL`) selects a PostgreSQL
 * server; without one, the embedded PGlite default in `dataDir` (else `ACTA_DATA_DIR`, else
 * `./.acta/data`). Throws DataDirLockedError if another live process has that folder open.
 */
export async function connect(options: { url?: string; dataDir?: string; max?: number } = {}): Promise<Db> {
  const url = options.url ?? process.env.DATABASE_URL;
  if (url) return createPgDb({ connectionString: url, max: options.max });
  return createPgliteDb({ dataDir: options.dataDir ?? process.env.ACTA_DATA_DIR ?? DEFAULT_DATA_DIR });
}

/** A short description of where a Db keeps its data, for logs (no password). */
export function describeTarget(options: { url?: string; dataDir?: string } = {}): string {
  const url = options.url ?? process.env.DATABASE_URL;
  if (url) return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
  return `PGlite at ${path.resolve(options.dataDir ?? process.env.ACTA_DATA_DIR ?? DEFAULT_DATA_DIR)}`;
}
