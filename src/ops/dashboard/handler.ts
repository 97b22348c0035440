/*
 * createDashboardHandler: the dashboard as a `(req, res)` handler for node:http or express
 * (docs/dashboard.md). GET renders a page and never changes anything; an action is a POST to
 * /actions/<name> with the CSRF token of the requester, refused in read-only mode, logged with who
 * did it, and answered with a redirect to the page it came from.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createClient } from '../../client/client';
import { jobIdText } from '../../client/jobId';
import { intOption, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption } from '../../config';
import { type Db, withDeadline } from '../../db/Db';
import { isUnreachableError } from '../../db/transient';
import { ActaError, ConfigError, DbUnansweredError } from '../../errors';
import { createLogger, type Logger } from '../../logger';
import { alertsNotes } from '../alertsNotes';
import { assertPauseDeclared } from '../pauseCheck';
import { unchangedJobs, unchangedMessage } from '../unchanged';
import { INT8_MAX, type JobStatus } from '../../db/types';
import { type Html, html } from './html';
import { attemptsPerMinute, jobChildren, jobDetail, jobSignals } from './queries';
import { checkAuth, createCsrf, type Csrf, identify, TOKEN_COOKIE } from './security';
import { jobPage } from './views/job';
import { jobsPage, type JobsQuery } from './views/jobs';
import { layout, type ViewContext } from './views/layout';
import { alertsPage } from './views/alerts';
import { overviewPage } from './views/overview';
import { schedulesPage } from './views/schedules';
import { workersPage } from './views/workers';

export interface DashboardOptions {
  db: Db;
  /** The namespace shown when a request names none (default 'default'). */
  namespace?: string;
  /** Requests must carry this token (`Authorization: Bearer`, or open the dashboard once with `?token=`). */
  token?: string;
  /** Requests must carry basic auth `user:password`; actions are logged with the user. */
  basic?: string;
  /** Pages only: no action is shown, and every POST is refused (403). */
  readOnly?: boolean;
  /** Where the action log goes (default: acta's pino logger). */
  logger?: Logger;
  /** The path the handler is mounted at in a node:http server, e.g. '/acta' (express: its mount path is used). */
  basePath?: string;
  /** Minutes the attempts chart covers, 5 to 1,440 (default 60). */
  chartMinutes?: number;
  /** The CSRF tokens (default: a secret of this process). */
  csrf?: Csrf;
  /**
   * How long each statement of a page or an action may go unanswered, ms (default 30 000, as the
   * CLI's commands): then its connection is dropped and the request answers 503. Each call is made
   * with it (withDeadline, CallOptions); a Db wrapper of yours must pass the call's third argument on.
   */
  statementDeadlineMs?: number;
}

/** The default of DashboardOptions.statementDeadlineMs: the CLI's client commands' (CLI_STATEMENT_DEADLINE_MS). */
export const DASHBOARD_STATEMENT_DEADLINE_MS = 30_000;

export type DashboardHandler = (req: IncomingMessage, res: ServerResponse) => void;

const ACTIONS = ['retry', 'cancel', 'delete', 'pause', 'resume'] as const;
type Action = (typeof ACTIONS)[number];
const MAX_FORM_BYTES = 16_384;
const ALERTS_SHOWN = 500;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Throws DashboardSecurityError for malformed auth, ConfigError for a bad option. */
export function createDashboardHandler(options: DashboardOptions): DashboardHandler {
  const auth = { token: options.token, basic: options.basic };
  checkAuth(auth);
  const readOnly = options.readOnly === true;
  const defaultNamespace = options.namespace === undefined ? 'default' : nameOption('namespace', options.namespace, MAX_NAME_BYTES);
  const chartMinutes = options.chartMinutes ?? 60;
  if (!Number.isInteger(chartMinutes) || chartMinutes < 5 || chartMinutes > 1_440) throw new ConfigError(`chartMinutes must be an integer from 5 to 1440, got ${String(chartMinutes)}`);
  const csrf = options.csrf ?? createCsrf();
  const log = (options.logger ?? createLogger()).child({ component: 'dashboard' });
  // Each statement answered within the deadline: a silent network (no error, no FIN) held a page
  // request, and the pool connection under it, for good (test/faults/dashboardPartition.test.ts).
  const deadlineMs = intOption('statementDeadlineMs', options.statementDeadlineMs ?? DASHBOARD_STATEMENT_DEADLINE_MS, 1, MAX_TIMER_MS);
  const db = withDeadline(options.db, deadlineMs);

  /** The path the handler is mounted at: basePath, else express's mount path, else the root (''). */
  const baseOf = (req: IncomingMessage): string => {
    const mounted = (req as { baseUrl?: unknown }).baseUrl;
    return (options.basePath ?? (typeof mounted === 'string' ? mounted : '')).replace(/\/$/, '');
  };

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const base = baseOf(req);
    let path = url.pathname;
    if (options.basePath !== undefined && path.startsWith(base)) path = path.slice(base.length);
    // One leading slash: `//evil.example` in a redirect is another site.
    path = path.replace(/^\/+/, '/');
    if (path === '') path = '/';

    // A token in the address: kept as a cookie for this browser, then the address without it.
    const given = url.searchParams.get('token');
    if (options.token !== undefined && given !== null) {
      url.searchParams.delete('token');
      if (given === options.token) res.setHeader('set-cookie', `${TOKEN_COOKIE}=${encodeURIComponent(given)}; HttpOnly; SameSite=Strict; Path=${base || '/'}`);
      return redirect(res, `${base}${path}${url.search}`);
    }
    const who = identify(req, auth);
    if (who === null) {
      if (options.basic !== undefined) res.setHeader('www-authenticate', 'Basic realm="acta dashboard", charset="UTF-8"');
      throw new HttpError(401, options.basic !== undefined ? 'basic auth required' : 'open the dashboard with ?token=<token> (or send Authorization: Bearer <token>)');
    }
    const namespace = url.searchParams.has('ns') ? nameOption('namespace', url.searchParams.get('ns'), MAX_NAME_BYTES) : defaultNamespace;
    const client = createClient({ db, namespace });
    const ctx: ViewContext = { base, namespace, csrf: csrf.tokenFor(who), readOnly, who, here: `${base}${path}${url.search}` };

    if (req.method === 'POST') {
      const m = /^\/actions\/([a-z]+)$/.exec(path);
      if (!m || !(ACTIONS as readonly string[]).includes(m[1])) throw new HttpError(404, 'no such action');
      if (readOnly) throw new HttpError(403, 'the dashboard is read-only');
      const form = await readForm(req);
      if (!csrf.check(who, form.get('csrf'))) throw new HttpError(403, 'the CSRF token is missing or not this dashboard\'s: reload the page and try again');
      const ns = nameOption('namespace', form.get('ns') ?? defaultNamespace, MAX_NAME_BYTES);
      const done = await act(m[1] as Action, createClient({ db, namespace: ns }), form, who, ns);
      // A job deleted leaves its page: back to the job list (one left as it was keeps its page).
      const back = safeBack(form.get('back'), base, m[1] === 'delete' && done === 'delete:1' ? form.get('id') : null);
      const target = new URL(back, 'http://dashboard');
      target.searchParams.set('done', done);
      return redirect(res, `${target.pathname}${target.search}`);
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD, POST');
      throw new HttpError(405, 'GET shows, POST /actions/<name> acts');
    }
    const flash = flashOf(url.searchParams.get('done'), namespace);
    if (path === '/') {
      const [namespaces, minutes, workers] = await Promise.all([client.namespaces(), attemptsPerMinute(db, namespace, chartMinutes), client.listWorkers()]);
      return send(res, 200, overviewPage(ctx, { namespaces, minutes, workers }, flash));
    }
    if (path === '/workers') return send(res, 200, workersPage(ctx, await client.listWorkers()));
    if (path === '/schedules') return send(res, 200, schedulesPage(ctx, await client.schedules.list()));
    if (path === '/alerts') {
      const [alerts, notes] = await Promise.all([client.alerts({ all: true, limit: ALERTS_SHOWN }), alertsNotes(db, namespace)]);
      return send(res, 200, alertsPage(ctx, alerts, ALERTS_SHOWN, notes));
    }
    if (path === '/jobs') {
      const q = url.searchParams;
      const query: JobsQuery = { status: q.get('status') || undefined, definition: q.get('definition') || undefined, concurrencyKey: q.get('key') || undefined, lane: q.get('lane') || undefined, cursor: q.get('cursor') || undefined };
      const page = await client.listJobs({ status: query.status as never, definition: query.definition, concurrencyKey: query.concurrencyKey, lane: query.lane, cursor: query.cursor, limit: 50 });
      return send(res, 200, jobsPage(ctx, query, page, flash));
    }
    const job = /^\/jobs\/([0-9]+)$/.exec(path);
    if (job) {
      // As `acta job <id>` reads an id (jobIdText): leading zeros allowed; beyond bigint, no such job.
      const id = jobIdText(job[1]);
      const detail = id === null ? null : await jobDetail(db, namespace, id);
      if (detail === null) throw new HttpError(404, `no job ${job[1]} in namespace "${namespace}"`);
      const childrenAfter = cursorParam(url.searchParams, 'children');
      const signalsAfter = cursorParam(url.searchParams, 'signals');
      const [why, children, signals] = await Promise.all([client.why(detail.id), jobChildren(db, detail.id, childrenAfter), jobSignals(db, detail.id, signalsAfter)]);
      return send(res, 200, jobPage(ctx, detail, why, { children, signals, childrenAfter, signalsAfter }, flash));
    }
    throw new HttpError(404, 'no such page');
  }

  async function act(action: Action, client: ReturnType<typeof createClient>, form: URLSearchParams, who: string, namespace: string): Promise<string> {
    const text = (k: string) => {
      const v = form.get(k);
      return v === null || v.trim() === '' ? undefined : v.trim();
    };
    // An id as `acta jobs retry|cancel|delete` and the client read it (jobIdText): a ConfigError
    // (400) for one that is no positive integer; beyond bigint, no job's (test/dashboard.test.ts).
    const id = () => {
      const v = text('id');
      if (v === undefined) throw new HttpError(400, 'the action needs a job id');
      jobIdText(v);
      return v;
    };
    let n: number;
    let fields: Record<string, unknown>;
    if (action === 'retry') {
      fields = { id: id() };
      n = (await client.retryJobs({ ids: [fields.id as string] })).length;
    } else if (action === 'cancel') {
      fields = { id: id() };
      const r = await client.cancelJobs({ ids: [fields.id as string] });
      n = r.cancelled.length + r.requested.length;
    } else if (action === 'delete') {
      fields = { id: id() };
      n = (await client.deleteJobs({ ids: [fields.id as string] })).length;
    } else if (action === 'pause') {
      fields = { definition: text('definition') ?? null, reason: text('reason') ?? null };
      const definition = text('definition') === undefined ? undefined : nameOption('definition', text('definition'), MAX_NAME_BYTES);
      // A scope no worker has declared is refused, as by `acta pause` (src/ops/pauseCheck.ts): 409
      // with the message on the page, nothing paused.
      await assertPauseDeclared(db, namespace, definition, 'dashboard').catch((err: unknown) => {
        if (err instanceof ActaError && err.code === 'ACTA_PAUSE_UNDECLARED') {
          log.info({ action, who, namespace, ...fields, changed: 0, refused: err.message }, `dashboard: ${action} by ${who} refused`);
          throw new HttpError(409, err.message);
        }
        throw err;
      });
      n = (await client.pause({ definition: text('definition'), reason: text('reason'), by: `${who} (dashboard)` })).created ? 1 : 0;
    } else {
      fields = { definition: text('definition') ?? null };
      n = (await client.resume({ definition: text('definition') })) ? 1 : 0;
    }
    if (n === 0 && (action === 'retry' || action === 'cancel' || action === 'delete')) {
      // Why the job was left as it was, as `acta jobs <action>` says it (src/ops/unchanged.ts): its
      // status after the action goes into the page's address, the words are made from it there.
      const [left] = await unchangedJobs(db, namespace, action, [fields.id as string]);
      log.info({ action, who, namespace, ...fields, changed: 0, status: left.status }, `dashboard: ${action} by ${who}`);
      return `${action}:0:${left.id}:${left.status ?? 'none'}`;
    }
    log.info({ action, who, namespace, ...fields, changed: n }, `dashboard: ${action} by ${who}`);
    return `${action}:${n}`;
  }

  return (req, res) => {
    res.setHeader('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    res.setHeader('x-frame-options', 'DENY');
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('cache-control', 'no-store');
    serve(req, res).catch((err: unknown) => {
      // The database not reached, or silent past the deadline: 503, the page works again once it answers.
      const known = err instanceof HttpError ? err.status : err instanceof ActaError && err.code === 'ACTA_CONFIG' ? 400 : isUnreachableError(err) ? 503 : 500;
      if (known >= 500) log.error({ err, url: req.url, status: known }, 'dashboard: a page failed');
      if (res.headersSent) return void res.end();
      const message =
        known === 503
          ? `the database did not answer${err instanceof DbUnansweredError ? ` within ${err.deadlineMs} ms` : ''} (the error is in the dashboard's log): reload once it answers${req.method === 'POST' && err instanceof DbUnansweredError ? '; the action may have been done: check the page first' : ''}`
          : known === 500
            ? 'the dashboard could not answer (the error is in its log)'
            : (err as Error).message;
      // No requester known here: no action forms, and the header names no one.
      send(res, known, layout({ base: baseOf(req), namespace: defaultNamespace, csrf: '', readOnly: true, who: '', here: '/' }, `${known}`, html`<p id="error">${message}</p>`));
    });
  };
}

function send(res: ServerResponse, status: number, page: Html): void {
  res.statusCode = status;
  res.setHeader('content-type', 'text/html; charset=utf-8');
  res.end(page.text);
}

function redirect(res: ServerResponse, location: string): void {
  res.statusCode = 303;
  res.setHeader('location', location);
  res.end();
}

/** A list's cursor in a page's address (the id its "next page" link gives), or null for its first page; 400 for anything else. */
function cursorParam(query: URLSearchParams, name: string): string | null {
  const v = query.get(name);
  if (v === null || v === '') return null;
  if (!/^[0-9]{1,19}$/.test(v) || BigInt(v) > INT8_MAX) throw new HttpError(400, `${name} must be the id its "next page" link gives, got ${JSON.stringify(v.slice(0, 40))}`);
  return v;
}

/** A urlencoded body of at most MAX_FORM_BYTES. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '')) throw new HttpError(415, 'an action is a form post (application/x-www-form-urlencoded)');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new HttpError(413, 'the form is too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** The page an action returns to: a path under the handler (never another site), else the overview; a deleted job's page: the job list. */
function safeBack(back: string | null, base: string, deletedId: string | null): string {
  const ok = back !== null && back.startsWith(`${base}/`) && !back.startsWith('//') && !/[\\\r\n]/.test(back) && !new URL(back, 'http://dashboard').pathname.startsWith('//');
  if (!ok) return `${base}/`;
  // The job's page by its id as the page reads it (jobIdText): /jobs/007 is job 7's page too.
  const at = new URL(back, 'http://dashboard');
  const page = at.pathname.startsWith(`${base}/jobs/`) ? /^[0-9]+$/.exec(at.pathname.slice(`${base}/jobs/`.length)) : null;
  if (deletedId !== null && page !== null && jobIdText(page[0]) === jobIdText(deletedId)) return `${base}/jobs${at.search}`;
  return back;
}

const PAST = { retry: 'retried', cancel: 'cancelled', delete: 'deleted' } as const;

const FLASH: Record<Action, (n: number) => string> = {
  retry: (n) => (n > 0 ? 'Retried: the job is Ready and due now.' : 'Not retried: only a Failed or Cancelled job can be.'),
  cancel: (n) => (n > 0 ? 'Cancelled (a running job: its worker was asked to stop it).' : 'Not cancelled: it had finished.'),
  delete: (n) => (n > 0 ? 'Deleted, with its steps, signals and attempts.' : 'Not deleted: only a finished job can be.'),
  pause: (n) => (n > 0 ? 'Paused: claims stop within one wakeup; running jobs finish.' : 'Already paused.'),
  resume: (n) => (n > 0 ? 'Resumed: workers claim at once.' : 'It was not paused.'),
};

const STATUS_WORDS: readonly string[] = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];

/** The line an action's redirect shows: `action:n`, or for a job left as it was `action:0:<id>:<status | none>` in unchangedMessage's words. */
function flashOf(done: string | null, namespace: string): string | null {
  const m = done === null ? null : /^([a-z]+):([0-9]+)(?::([0-9]+):([a-z]+))?$/.exec(done);
  if (!m || !(m[1] in FLASH)) return null;
  const action = m[1] as Action;
  if (m[3] !== undefined && (action === 'retry' || action === 'cancel' || action === 'delete') && (m[4] === 'none' || STATUS_WORDS.includes(m[4]))) {
    return `Not ${PAST[action]}: ${unchangedMessage(action, m[3], m[4] === 'none' ? null : (m[4] as JobStatus), namespace)}.`;
  }
  return FLASH[action](Number(m[2]));
}
