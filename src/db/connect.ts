import * as path from 'node:path';
import { DataDirLockedError } from '../errors';
import type { Db } from './Db';
import { connectShared, socketPathFor } from './embeddedShare';
import { createPgDb } from './pgDb';
import { createPgliteDb } from './pgliteDb';

/** Where the embedded default keeps its data when nothing else is said: `./.acta/data`. */
export const DEFAULT_DATA_DIR = path.join('.acta', 'data');

/**
 * Which database a process was pointed at, most explicit first: `options.url`, then
 * `options.dataDir` (an explicit folder is the embedded default even when DATABASE_URL is set),
 * then `DATABASE_URL`, then `ACTA_DATA_DIR`, then `./.acta/data`.
 */
function resolveTarget(options: { url?: string; dataDir?: string }): { url: string } | { dataDir: string } {
  if (options.url) return { url: options.url };
  if (options.dataDir) return { dataDir: options.dataDir };
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL };
  return { dataDir: process.env.ACTA_DATA_DIR || DEFAULT_DATA_DIR };
}

/**
 * Opens the database a process was pointed at (see resolveTarget: `url`, else `dataDir`, else
 * `DATABASE_URL` selects a PostgreSQL server, else the embedded PGlite default in
 * `ACTA_DATA_DIR` or `./.acta/data`). A data folder another live process holds is used through
 * the socket that process serves it on (embeddedShare.ts); DataDirLockedError only when it does not
 * serve it.
 */
export async function connect(options: { url?: string; dataDir?: string; max?: number } = {}): Promise<Db> {
  const target = resolveTarget(options);
  if ('url' in target) return createPgDb({ connectionString: target.url, max: options.max });
  try {
    return await createPgliteDb({ dataDir: target.dataDir });
  } catch (err) {
    // Held by another live process: use the database it serves beside the folder (embeddedShare.ts).
    if (!(err instanceof DataDirLockedError) || err.pid <= 0 || err.pid === process.pid) throw err;
    const shared = await connectShared(socketPathFor(target.dataDir)).catch(() => undefined);
    if (shared) return shared;
    throw err;
  }
}

/** A short description of where a Db keeps its data, for logs (no password). */
export function describeTarget(options: { url?: string; dataDir?: string } = {}): string {
  const target = resolveTarget(options);
  if ('url' in target) return target.url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
  return target.dataDir.startsWith('memory://') ? `PGlite in memory` : `PGlite at ${path.resolve(target.dataDir)}`;
}
