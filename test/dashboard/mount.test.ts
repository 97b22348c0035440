// createDashboardHandler mounted under a path in the user's own node:http server (docs/dashboard.md,
// "In your own server"): its pages answer under the path with links and forms under it; the rest
// of the server is the user's; an action returns to its page under the path.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, createDashboardHandler } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase();

test('mounted at /acta: pages and their links under /acta, the app answers the rest, an action redirects back under /acta', async () => {
  const dashboard = createDashboardHandler({ db, basic: 'ops:mount-pass', basePath: '/acta', logger: silentLogger });
  const server = http.createServer((req, res) => (req.url?.startsWith('/acta') ? dashboard(req, res) : res.end('the app')));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const headers = { authorization: `Basic ${Buffer.from('ops:mount-pass').toString('base64')}` };
  try {
    expect(await (await fetch(`${url}/elsewhere`)).text()).toBe('the app');
    expect((await fetch(`${url}/acta/`)).status).toBe(401);
    for (const p of ['/acta/', '/acta/jobs', '/acta/workers', '/acta/schedules', '/acta/alerts']) {
      const res = await fetch(`${url}${p}`, { headers });
      expect({ p, status: res.status }).toEqual({ p, status: 200 });
      const hrefs = [...(await res.text()).matchAll(/\s(?:href|action)="([^"]+)"/g)].map((m) => m[1]);
      expect(hrefs.length).toBeGreaterThan(0);
      expect(hrefs.filter((h) => !h.startsWith('/acta/'))).toEqual([]);
    }
    // An error page too: its links under /acta, and a header that names no one (it knows no requester).
    const missing = await fetch(`${url}/acta/no-such-page`, { headers });
    expect(missing.status).toBe(404);
    const text = await missing.text();
    expect([...text.matchAll(/\shref="([^"]+)"/g)].map((m) => m[1]).filter((h) => !h.startsWith('/acta/'))).toEqual([]);
    expect(text).toMatch(/<span class="who">namespace <b>default<\/b><\/span>/);
    const { id } = await createClient({ db, force: true }).enqueue('mounted', {}, { runAt: new Date(Date.now() + 3_600_000) });
    const page = await (await fetch(`${url}/acta/jobs/${id}`, { headers })).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
    expect(csrf).toBeDefined();
    const res = await fetch(`${url}/acta/actions/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: csrf!, ns: 'default', id, back: `/acta/jobs/${id}?ns=default` }).toString(),
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toMatch(new RegExp(`^/acta/jobs/${id}\\?ns=default&done=cancel%3A1$`));
    expect((await createClient({ db }).getJob(id))?.status).toBe('cancelled');
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
