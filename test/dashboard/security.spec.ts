// The dashboard's security rules (src/ops/dashboard/security.ts; docs/dashboard.md, "Security").
import * as http from 'node:http';
import type { IncomingMessage } from 'node:http';
import { DashboardSecurityError } from '../../src/errors';
import { startDashboard } from '../../src/ops/dashboard/server';
import { assertSafeBinding, createCsrf, identify, loopbackHost, TOKEN_COOKIE } from '../../src/ops/dashboard/security';
import { silentLogger } from '../helpers/silentLogger';

/** One raw request (the path sent as written, a Host header of our choosing): status and Location. */
function request(port: number, method: string, path: string, host: string): Promise<{ status: number; location?: string }> {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method, path, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location }));
    });
    r.on('error', reject);
    r.end();
  });
}

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

test('a host beyond the loopback without a token or basic auth is refused with a typed error; the loopback and auth are accepted', async () => {
  for (const host of ['0.0.0.0', '::', '192.168.1.5', 'example.com']) {
    expect(() => assertSafeBinding(host, {})).toThrow(DashboardSecurityError);
    expect(() => assertSafeBinding(host, {})).toThrow(expect.objectContaining({ code: 'ACTA_DASHBOARD_UNSAFE' }));
    expect(() => assertSafeBinding(host, { token: 'a-long-token' })).not.toThrow();
    expect(() => assertSafeBinding(host, { basic: 'ops:secret' })).not.toThrow();
  }
  for (const host of ['127.0.0.1', '::1', 'localhost']) expect(() => assertSafeBinding(host, {})).not.toThrow();
  expect(() => assertSafeBinding('0.0.0.0', { token: 'short' })).toThrow(DashboardSecurityError);
  expect(() => assertSafeBinding('0.0.0.0', { basic: 'nopassword' })).toThrow(DashboardSecurityError);
  expect(() => assertSafeBinding('0.0.0.0', { basic: 'a:b', token: 'a-long-token' })).toThrow(DashboardSecurityError);
  // startDashboard refuses before anything listens (its db is never touched).
  await expect(startDashboard({ db: {} as never, host: '0.0.0.0', port: 0 })).rejects.toThrow(DashboardSecurityError);
});

test("the CSRF token is the requester's under this process's secret: another's, another process's, a missing or altered one fail", () => {
  const csrf = createCsrf();
  const t = csrf.tokenFor('alice');
  expect(csrf.check('alice', t)).toBe(true);
  expect(csrf.check('bob', t)).toBe(false);
  expect(csrf.check('alice', createCsrf().tokenFor('alice'))).toBe(false);
  expect(csrf.check('alice', undefined)).toBe(false);
  expect(csrf.check('alice', null)).toBe(false);
  expect(csrf.check('alice', '')).toBe(false);
  expect(csrf.check('alice', `${t.slice(0, -1)}${t.endsWith('A') ? 'B' : 'A'}`)).toBe(false);
});

test('identify: basic auth names its user, a token (bearer or cookie) is "token", no auth configured is "local"; anything else is refused', () => {
  const basic = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;
  expect(identify(req({ authorization: basic('ops:s3cret') }), { basic: 'ops:s3cret' })).toBe('ops');
  expect(identify(req({ authorization: basic('ops:wrong') }), { basic: 'ops:s3cret' })).toBeNull();
  expect(identify(req({}), { basic: 'ops:s3cret' })).toBeNull();
  expect(identify(req({ authorization: 'Bearer tok-123456' }), { token: 'tok-123456' })).toBe('token');
  expect(identify(req({ cookie: `a=b; ${TOKEN_COOKIE}=tok-123456` }), { token: 'tok-123456' })).toBe('token');
  expect(identify(req({ authorization: 'Bearer tok-999999' }), { token: 'tok-123456' })).toBeNull();
  expect(identify(req({}), { token: 'tok-123456' })).toBeNull();
  expect(identify(req({}), {})).toBe('local');
});

test('without auth the dashboard answers only requests addressed to the loopback by name: a page rebinding its own name to 127.0.0.1 is refused', async () => {
  for (const host of ['127.0.0.1', '127.0.0.1:4000', 'localhost:4000', 'LOCALHOST', '[::1]:4000', '[::1]']) expect(loopbackHost(host)).toBe(true);
  for (const host of [undefined, '', 'attacker.example', 'attacker.example:4000', '127.0.0.1.attacker.example', 'localhost.attacker.example:4000', '[::2]:4000']) expect(loopbackHost(host)).toBe(false);
  const open = await startDashboard({ db: {} as never, port: 0, logger: silentLogger });
  try {
    // POST /actions/nope is refused (404) before any database call: it shows the request got through.
    expect((await request(open.port, 'POST', '/actions/nope', `127.0.0.1:${open.port}`)).status).toBe(404);
    expect((await request(open.port, 'POST', '/actions/nope', `localhost:${open.port}`)).status).toBe(404);
    expect((await request(open.port, 'GET', '/', `attacker.example:${open.port}`)).status).toBe(403);
    expect((await request(open.port, 'POST', '/actions/resume', `attacker.example:${open.port}`)).status).toBe(403);
  } finally {
    await open.close();
  }
  // With a token any name is served (the token, not the name, is the gate).
  const guarded = await startDashboard({ db: {} as never, port: 0, token: 'a-long-token', logger: silentLogger });
  try {
    expect((await request(guarded.port, 'GET', '/', `dashboard.example:${guarded.port}`)).status).toBe(401);
  } finally {
    await guarded.close();
  }
});

test("?token= redirects within the dashboard only: a path that normalises to //host is not another site", async () => {
  const d = await startDashboard({ db: {} as never, port: 0, token: 'a-long-token', logger: silentLogger });
  try {
    for (const path of ['/.//evil.example/login?token=x', '/a/..//evil.example?token=x', '/%2e//evil.example?token=x', '//evil.example?token=x']) {
      const { status, location } = await request(d.port, 'GET', path, `127.0.0.1:${d.port}`);
      expect({ path, status }).toEqual({ path, status: 303 });
      expect(location).toMatch(/^\/(?!\/)/);
    }
  } finally {
    await d.close();
  }
});
