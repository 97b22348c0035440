/**
 * The peer queues are bench/'s own dependencies (bench/package.json, installed by
 * scripts/bench-deps.js), not acta's, so a user's install never brings them: they load from
 * bench/node_modules, which a plain require from dist/bench/ would not search. Compiled files run
 * from dist/bench/, so bench/ is two folders up.
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

export const BENCH_DIR = path.resolve(__dirname, '..', '..', 'bench');
const benchRequire = createRequire(path.join(BENCH_DIR, 'package.json'));

export const graphileWorker = async (): Promise<typeof import('graphile-worker')> => benchRequire('graphile-worker');
export const pgBoss = async (): Promise<typeof import('pg-boss')> => benchRequire('pg-boss');
export const bullmq = async (): Promise<typeof import('bullmq')> => benchRequire('bullmq');

/** The installed version of one of bench/'s dependencies, '?' if it cannot be read. */
export function peerVersion(name: string): string {
  try {
    return JSON.parse(fs.readFileSync(path.join(BENCH_DIR, 'node_modules', name, 'package.json'), 'utf8')).version;
  } catch {
    return '?';
  }
}
