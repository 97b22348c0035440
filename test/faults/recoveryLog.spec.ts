// The recovery pass's log line (src/worker/recovery.ts; docs/operating.md, "Logs"): it counts the
// rows a call returned and names their jobs, the first 20, as the shutdown-timeout line names its
// jobIds. The database call is a stub.
import { lastValueFrom } from 'rxjs';
import pino from 'pino';
import type { RecoveredRow } from '../../src/db/types';
import { recoveryPass } from '../../src/worker/recovery';

test("'recovered jobs whose lease expired' counts the rows and names the first 20 job ids", async () => {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const rows: RecoveredRow[] = Array.from({ length: 25 }, (_, i) => ({ id: String(100 + i), execution: 1, status: i < 2 ? 'failed' : 'ready', charged: i < 5 }));
  const calls: number[] = [];
  const total = await lastValueFrom(recoveryPass({ recover: async (limit) => (calls.push(limit), rows), logger }));
  expect([total, calls.length]).toEqual([25, 1]);
  expect(lines.map(({ msg, recovered, charged, failed, jobIds }) => ({ msg, recovered, charged, failed, jobIds }))).toEqual([
    { msg: 'recovered jobs whose lease expired', recovered: 25, charged: 5, failed: 2, jobIds: rows.slice(0, 20).map((r) => r.id) },
  ]);
  // A pass that returns nothing logs nothing.
  lines.length = 0;
  await lastValueFrom(recoveryPass({ recover: async () => [], logger }));
  expect(lines).toEqual([]);
});
