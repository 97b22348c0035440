import { defer, type Observable } from 'rxjs';
import type { Logger } from 'pino';
import type { RecoveredRow } from './db/functions';

/** Rows per recover_jobs call; the pass repeats until a call returns fewer. */
export const RECOVERY_BATCH = 10_000;

/**
 * One recovery pass (shared/DESIGN.md, lease clock; issue 4): calls acta.recover_jobs until it
 * returns fewer than a full batch. It runs beside the worker's loop, taken by whichever
 * heartbeat found it due, so a worker whose executors are all busy still sweeps; a worker that
 * dies mid-pass holds nothing back (each call is its own transaction with SKIP LOCKED).
 * Emits the total rows returned; errors are logged, never thrown.
 */
export function recoveryPass(recover: (limit: number) => Promise<RecoveredRow[]>, logger: Logger, onRecovered?: (rows: RecoveredRow[]) => void): Observable<number> {
  return defer(async () => {
    let total = 0;
    try {
      for (;;) {
        const rows = await recover(RECOVERY_BATCH);
        total += rows.length;
        if (rows.length > 0) {
          onRecovered?.(rows);
          logger.warn({ recovered: rows.length, charged: rows.filter((r) => r.charged).length }, 'recovered jobs whose lease expired');
        }
        if (rows.length < RECOVERY_BATCH) break;
      }
    } catch (err) {
      logger.error({ err }, 'recovery pass failed; the next pass retries');
    }
    return total;
  });
}
