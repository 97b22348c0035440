import * as http from 'node:http';
import { Counter, Gauge, Histogram, type Metric, Registry } from 'prom-client';
import { ActaError, ConfigError } from '../errors';
import type { DepthStatus, JobCount } from '../db/jobs';
import type { CompletionOutcome } from '../db/types';
import type { Permits } from './permits';
import type { Registry as InFlight } from './registry';

/**
 * Every label value a labelled counter counts, each given its series at 0 when the registry is made:
 * a series that appears only at its first event is invisible to rate() and to alerts on it until
 * then (test/metrics.spec.ts). A Record, so a new CompletionOutcome must be listed here to compile.
 */
const OUTCOMES: Record<CompletionOutcome, true> = {
  succeeded: true,
  failed: true,
  failed_final: true,
  handed_back: true,
  expired: true,
  rate_limited: true,
  cancelled: true,
  skipped: true,
  signal_wait: true,
  children_wait: true,
};
const CHARGED = ['true', 'false'] as const;

/** acta_jobs: the statuses counted, each up to this many jobs (as acta namespaces counts), read at most once per JOBS_TTL_MS (docs/operating.md, "Metrics"). */
const DEPTH_STATUSES: readonly DepthStatus[] = ['ready', 'waiting', 'executing'];
export const JOBS_COUNT_CAP = 100_000;
export const JOBS_TTL_MS = 5_000;

/** What acta_jobs reads: the namespace's counts (ledger.countJobs), the worker's definitions (a series each at 0), and a clock for the cache. */
export interface JobsSource {
  namespace: string;
  definitions: readonly string[];
  count: (cap: number) => Promise<JobCount[]>;
  now: () => number;
}

/**
 * The counts of one read, shared by the scrapes of the next JOBS_TTL_MS (and by scrapes at once):
 * the database is read at most once per TTL whatever the scrape rate. null when the read failed.
 */
function cachedCounts(source: JobsSource): () => Promise<JobCount[] | null> {
  let last: { at: number; counts: JobCount[] | null } | undefined;
  let reading: Promise<JobCount[] | null> | undefined;
  return () => {
    if (last && source.now() - last.at < JOBS_TTL_MS) return Promise.resolve(last.counts);
    reading ??= source
      .count(JOBS_COUNT_CAP)
      .then(
        (counts) => counts,
        () => null,
      )
      .then((counts) => {
        last = { at: source.now(), counts };
        reading = undefined;
        return counts;
      });
    return reading;
  };
}

/**
 * A worker's Prometheus metrics (docs/DESIGN.md, "Names": `acta_` prefix, base units, `_total`
 * for counters, no job id as a label). Each worker has its own prom-client Registry unless one is
 * given, so several workers in one process do not collide. Into a given one they are registered
 * all or none: a name registered there already (another worker's that has not ended) is a
 * ConfigError and leaves the registry as it was (test/metrics.spec.ts).
 */
export class WorkerMetrics {
  readonly registry: Registry;
  readonly inflight: Gauge<'state'>;
  readonly permitsFree: Gauge;
  readonly batchSize: Histogram;
  readonly claimDuration: Histogram;
  readonly claimRowsAsked: Counter;
  readonly claimRowsClaimed: Counter;
  readonly completions: Counter<'outcome'>;
  readonly completionsStale: Counter;
  readonly writeRetries: Counter;
  readonly heartbeatFailures: Counter;
  readonly recovered: Counter<'charged'>;
  readonly listenerReconnects: Counter;
  readonly degraded: Gauge;
  /** Absent when the ledger cannot count jobs (Ledger.countJobs). */
  readonly jobs?: Gauge<'namespace' | 'definition' | 'status'>;
  /** This worker's metrics, those of `extra` among them: what it registered, and unregister() removes. */
  private readonly own: Metric[];

  /** `degraded`: true while the heartbeat fails or the LISTEN connection is down. */
  /** `jobs`: what acta_jobs reads (none: no acta_jobs). */
  /** `extra`: metrics the worker adds beside these (acta_alert: src/recurring/alerts.ts), made unregistered (`registers: []`). */
  constructor(source: { inflight: InFlight; permits: Permits; degraded?: () => boolean; jobs?: JobsSource; extra?: () => Metric[] }, registry = new Registry()) {
    this.registry = registry;
    // Made unregistered, then registered together below once no name is taken.
    const registers: Registry[] = [];
    this.inflight = new Gauge({
      name: 'acta_jobs_inflight',
      help: 'Claims held by this worker, by registry state (claimed, executing, finalizing)',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = source.inflight.countByState();
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
    this.permitsFree = new Gauge({
      name: 'acta_permits_free',
      help: 'Executor permits free right now',
      registers,
      collect() {
        this.set(source.permits.available);
      },
    });
    this.batchSize = new Histogram({
      name: 'acta_completions_batch_size',
      help: 'Completions per complete_executions call',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    });
    this.claimDuration = new Histogram({
      name: 'acta_claim_duration_seconds',
      help: 'Round-trip time of one claim call',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.claimRowsAsked = new Counter({ name: 'acta_claim_rows_asked_total', help: 'Rows asked for by claims', registers });
    this.claimRowsClaimed = new Counter({ name: 'acta_claim_rows_claimed_total', help: 'Rows claims returned (asked - claimed = wasted)', registers });
    this.completions = new Counter({ name: 'acta_completions_total', help: 'Attempts ended, by outcome', labelNames: ['outcome'], registers });
    this.completionsStale = new Counter({ name: 'acta_completions_stale_total', help: 'Completions fenced out (the row had moved on)', registers });
    this.writeRetries = new Counter({ name: 'acta_completion_write_retries_total', help: 'Repeats of failed completion writes', registers });
    this.heartbeatFailures = new Counter({ name: 'acta_heartbeat_failures_total', help: 'Failed heartbeat calls', registers });
    this.recovered = new Counter({ name: 'acta_recovered_jobs_total', help: 'Rows returned by recovery passes this worker ran', labelNames: ['charged'], registers });
    for (const outcome of Object.keys(OUTCOMES)) this.completions.inc({ outcome }, 0);
    for (const charged of CHARGED) this.recovered.inc({ charged }, 0);
    this.listenerReconnects = new Counter({ name: 'acta_listener_reconnects_total', help: 'Times the LISTEN connection was lost and LISTEN was in effect again', registers });
    if (source.jobs) this.jobs = this.jobsGauge(registers, source.jobs);
    this.degraded = new Gauge({
      name: 'acta_worker_degraded',
      help: '1 while the heartbeat fails (nothing is claimed) or the LISTEN connection is down (the safety poll claims), else 0',
      registers,
      collect() {
        this.set(source.degraded?.() ? 1 : 0);
      },
    });
    this.own = [this.inflight, this.permitsFree, this.batchSize, this.claimDuration, this.claimRowsAsked, this.claimRowsClaimed, this.completions, this.completionsStale, this.writeRetries, this.heartbeatFailures, this.recovered, this.listenerReconnects, this.degraded];
    if (this.jobs) this.own.push(this.jobs);
    this.own.push(...(source.extra?.() ?? []));
    const taken = this.own.map(nameOf).find((name) => registry.getSingleMetric(name) !== undefined);
    if (taken !== undefined) {
      throw new ConfigError(`metricsRegistry: a metric named ${taken} is registered there already (a worker that registered there has not ended: stop it first, or give each live worker a registry of its own)`);
    }
    for (const metric of this.own) registry.registerMetric(metric);
  }

  /**
   * acta_jobs{namespace,definition,status}: the namespace's jobs waiting or running, by definition
   * (every worker of the namespace reports the same counts), a series at 0 for each definition this
   * worker runs. No series while the database cannot be read: absent, not 0.
   */
  private jobsGauge(registers: Registry[], source: JobsSource): Gauge<'namespace' | 'definition' | 'status'> {
    const counts = cachedCounts(source);
    const { namespace } = source;
    return new Gauge({
      name: 'acta_jobs',
      help: `Jobs of the namespace by definition and status (ready, waiting, executing), each status counted up to ${JOBS_COUNT_CAP}, read at most every ${JOBS_TTL_MS / 1_000} s`,
      labelNames: ['namespace', 'definition', 'status'],
      registers,
      async collect() {
        const read = await counts();
        this.reset();
        if (read === null) return;
        for (const definition of source.definitions) for (const status of DEPTH_STATUSES) this.set({ namespace, definition, status }, 0);
        for (const c of read) this.set({ namespace, definition: c.definition, status: c.status }, c.count);
      },
    });
  }

  /**
   * Removes this worker's metrics from its registry, so another worker can register into it (the
   * worker does it when it has ended, with a given metricsRegistry). A name there that is not this
   * worker's metric is left alone; calling it again does nothing.
   */
  unregister(): void {
    for (const metric of this.own) {
      const name = nameOf(metric);
      if (this.registry.getSingleMetric(name) === metric) this.registry.removeSingleMetric(name);
    }
  }
}

/** prom-client keeps a metric's configuration on it, `name` included (its types leave it out). */
function nameOf(metric: Metric): string {
  return (metric as unknown as { name: string }).name;
}

/**
 * Serves `registry` as Prometheus text on `http://host:port/metrics`. Resolves with the server
 * once listening (port 0 picks a free one: read `server.address()`); rejects with ActaError
 * ACTA_METRICS_PORT, Node's error as `cause`, when the port cannot be listened on (EADDRINUSE,
 * EACCES): Node's own message names no option (test/db/wakeups.test.ts).
 */
export function serveMetrics(registry: Registry, port: number, host = '0.0.0.0'): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    // A scrape config's `params` arrive as a query string: the path alone decides.
    if ((req.url ?? '').split('?', 1)[0] !== '/metrics') {
      res.writeHead(404).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'is in use (by another process, or another worker of this one)' : err.code === 'EACCES' ? 'may not be listened on by this user' : `cannot be listened on (${err.message})`;
      reject(new ActaError('ACTA_METRICS_PORT', `metricsPort (--metrics-port) ${port} on ${host} ${why}: give another, or 0 for a free one; the worker did not start`, { cause: err }));
    });
    server.listen(port, host, () => resolve(server));
  });
}
