/*
 * Who may use the dashboard and how an action proves it came from its own page (docs/dashboard.md,
 * "Security"; docs/DESIGN.md, "Dashboard"): the loopback by default, any other address only with a
 * token or basic auth; every action a POST carrying the CSRF token of this process.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { DashboardSecurityError } from '../../errors';

/** How requests authenticate: none (loopback only), a bearer token, or basic auth. */
export interface DashboardAuth {
  token?: string;
  /** `user:password`. */
  basic?: string;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Throws DashboardSecurityError for a host beyond the loopback without auth, or malformed auth. */
export function assertSafeBinding(host: string, auth: DashboardAuth): void {
  checkAuth(auth);
  if (!LOOPBACK.has(host) && auth.token === undefined && auth.basic === undefined) {
    throw new DashboardSecurityError(`the dashboard listens on ${host}, beyond this machine: give --token or --basic user:password (or bind 127.0.0.1)`);
  }
}

/**
 * True when a request's Host header names the loopback (with any port). A dashboard without auth
 * serves only such requests: a web page whose own name an attacker rebinds to 127.0.0.1 sends that
 * name, and would otherwise read every page and post its CSRF token back (DNS rebinding).
 */
export function loopbackHost(header: string | undefined): boolean {
  if (header === undefined) return false;
  const name = header.startsWith('[') ? header.slice(1, header.indexOf(']')) : header.replace(/:\d*$/, '');
  return LOOPBACK.has(name.toLowerCase());
}

/** Throws DashboardSecurityError for an empty token or a basic value without `user:password`. */
export function checkAuth(auth: DashboardAuth): void {
  if (auth.token !== undefined && auth.basic !== undefined) throw new DashboardSecurityError('give a token or basic auth, not both');
  if (auth.token !== undefined && (typeof auth.token !== 'string' || auth.token.length < 8)) throw new DashboardSecurityError('the dashboard token must be at least 8 characters');
  if (auth.basic !== undefined && (typeof auth.basic !== 'string' || !/^[^:]+:.+$/.test(auth.basic))) throw new DashboardSecurityError('basic auth is user:password, both non-empty');
}

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** The token cookie a browser keeps after opening the dashboard with `?token=`. */
export const TOKEN_COOKIE = 'acta_dashboard_token';

/**
 * Who sent the request: the basic-auth user, 'token', or 'local' when the dashboard has no auth;
 * null when it does not authenticate. The token is taken from `Authorization: Bearer`, or the
 * cookie set from `?token=`.
 */
export function identify(req: IncomingMessage, auth: DashboardAuth): string | null {
  const header = req.headers.authorization ?? '';
  if (auth.basic !== undefined) {
    const m = /^Basic\s+(\S+)$/i.exec(header);
    if (!m) return null;
    const given = Buffer.from(m[1], 'base64').toString('utf8');
    return same(given, auth.basic) ? given.slice(0, given.indexOf(':')) : null;
  }
  if (auth.token !== undefined) {
    const bearer = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    const cookie = cookies(req)[TOKEN_COOKIE];
    return [bearer, cookie].some((t) => t !== undefined && same(t, auth.token as string)) ? 'token' : null;
  }
  return 'local';
}

export function cookies(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) {
      try {
        out[part.slice(0, i).trim()] = decodeURIComponent(part.slice(i + 1).trim());
      } catch {
        /* a cookie that is not ours */
      }
    }
  }
  return out;
}

/** The CSRF tokens of one handler: an HMAC of who is acting under a secret of this process. */
export interface Csrf {
  tokenFor(who: string): string;
  /** True when `given` is the token of `who`. */
  check(who: string, given: unknown): boolean;
}

export function createCsrf(secret: Buffer = randomBytes(32)): Csrf {
  const tokenFor = (who: string) => createHmac('sha256', secret).update(`acta-dashboard\u0000${who}`).digest('base64url');
  return { tokenFor, check: (who, given) => typeof given === 'string' && same(given, tokenFor(who)) };
}
