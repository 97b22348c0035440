// The dashboard's security rules (src/ops/dashboard/security.ts; docs/dashboard.md, "Security").
import type { IncomingMessage } from 'node:http';
import { DashboardSecurityError } from '../../src/errors';
import { startDashboard } from '../../src/ops/dashboard/server';
import { assertSafeBinding, createCsrf, identify, TOKEN_COOKIE } from '../../src/ops/dashboard/security';

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
