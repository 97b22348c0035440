/*
 * startDashboard: the dashboard on its own node:http server (acta dashboard). Bound to 127.0.0.1
 * unless told otherwise; any other address needs a token or basic auth (DashboardSecurityError at
 * start otherwise: nothing listens).
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDashboardHandler, type DashboardOptions } from './handler';
import { assertSafeBinding, loopbackHost } from './security';

export interface DashboardServerOptions extends DashboardOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 4000; 0: a free port. */
  port?: number;
}

export interface DashboardServer {
  /** http://host:port */
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startDashboard(options: DashboardServerOptions): Promise<DashboardServer> {
  const { host = '127.0.0.1', port = 4000, ...rest } = options;
  assertSafeBinding(host, { token: rest.token, basic: rest.basic });
  const handler = createDashboardHandler(rest);
  const open = rest.token === undefined && rest.basic === undefined;
  const server = http.createServer((req, res) => {
    // Without auth, only requests addressed to the loopback by name (loopbackHost: DNS rebinding).
    if (open && !loopbackHost(req.headers.host)) {
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('this dashboard has no auth: it answers requests to 127.0.0.1, [::1] or localhost only (give --token or --basic to serve other names)\n');
      return;
    }
    handler(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
