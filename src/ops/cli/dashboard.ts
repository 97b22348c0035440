/*
 * acta dashboard (docs/dashboard.md): the web dashboard on 127.0.0.1:4000 until SIGINT/SIGTERM. Any
 * other --host needs --token or --basic (refused at start otherwise); --read-only shows no action.
 */
import type { Command } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import { int, name } from './args';
import { connect, describeTarget } from '../../db/connect';
import { withDeadline } from '../../db/Db';
import { assertMigrated } from '../../db/migrator';
import { createLogger } from '../../logger';
import { DASHBOARD_STATEMENT_DEADLINE_MS } from '../dashboard/handler';
import { startDashboard } from '../dashboard/server';
import { assertSafeBinding } from '../dashboard/security';

const port = int(0, 65_535);

export function registerDashboardCommand(cli: Command): void {
  cli
    .command('dashboard')
    .description('serve the web dashboard (namespaces, attempts per minute, workers, jobs, a job\'s page and why; retry, cancel, delete, pause, resume) until SIGINT/SIGTERM')
    .option('--port <n>', 'port (0: a free one)', port, 4000)
    .option('--host <address>', 'address to listen on; beyond the loopback it needs --token or --basic', '127.0.0.1')
    .option('--token <token>', 'every request needs this token (open the dashboard once with ?token=<token>); default $ACTA_DASHBOARD_TOKEN')
    .option('--basic <user:password>', 'every request needs basic auth; actions are logged with the user')
    .option('--namespace <name>', 'the namespace shown first', name(MAX_NAME_BYTES), 'default')
    .option('--read-only', 'pages only: no retry, cancel, delete, pause or resume')
    .action(async (o: { port: number; host: string; token?: string; basic?: string; namespace: string; readOnly?: boolean }) => {
      const token = o.token ?? (o.basic === undefined ? process.env.ACTA_DASHBOARD_TOKEN || undefined : undefined);
      assertSafeBinding(o.host, { token, basic: o.basic }); // before anything connects
      const logger = createLogger();
      const base = await connect();
      // Its start's check within the pages' deadline too: a silent network held it for good.
      const db = withDeadline(base, DASHBOARD_STATEMENT_DEADLINE_MS);
      let server: Awaited<ReturnType<typeof startDashboard>>;
      try {
        await assertMigrated(db);
        server = await startDashboard({ db, host: o.host, port: o.port, token, basic: o.basic, namespace: o.namespace, readOnly: o.readOnly === true, logger });
      } catch (err) {
        // e.g. EADDRINUSE: close the database before main() reports it, or its pool's idle clients
        // (the embedded database's socket) keep the process alive after the message
        // (test/dashboard/cli.test.ts).
        await db.close().catch(() => undefined);
        throw err;
      }
      logger.info({ url: server.url, target: describeTarget(), readOnly: o.readOnly === true, auth: o.basic ? 'basic' : token ? 'token' : 'none' }, 'acta dashboard listening');
      console.error(`acta dashboard: ${server.url}/${token ? '?token=…' : ''}`);
      const stop = () => {
        void server.close().then(() => db.close()).then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
