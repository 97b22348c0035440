import * as http from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
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

/**
 * A worker's Prometheus metrics (docs/DESIGN.md, "Names": `acta_` prefix, base units, `_total`
 * for counters, no job id as a label). Each worker has its own prom-client Registry unless one is
 * given, so several workers in one process do not collide.
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
  /** Registered by the worker beside these (acta_alert: src/recurring/alerts.ts); unregistered with them. */
  readonly extra: { name: string }[] = [];

  /** `degraded`: true while the heartbeat fails or the LISTEN connection is down. */
  constructor(source: { inflight: InFlight; permits: Permits; degraded?: () => boolean }, registry = new Registry()) {
    this.registry = registry;
    const registers = [registry];
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
    this.degraded = new Gauge({
      name: 'acta_worker_degraded',
      help: '1 while the heartbeat fails (nothing is claimed) or the LISTEN connection is down (the safety poll claims), else 0',
      registers,
      collect() {
        this.set(source.degraded?.() ? 1 : 0);
      },
    });
  }

  /** Removes this worker's metrics from its registry, so another worker can register into it (runWorker$: the next incarnation). */
  unregister(): void {
    const own = [this.inflight, this.permitsFree, this.batchSize, this.claimDuration, this.claimRowsAsked, this.claimRowsClaimed, this.completions, this.completionsStale, this.writeRetries, this.heartbeatFailures, this.recovered, this.listenerReconnects, this.degraded];
    // prom-client keeps a metric's configuration on it, `name` included (its types leave it out).
    for (const metric of [...own, ...this.extra]) this.registry.removeSingleMetric((metric as unknown as { name: string }).name);
  }
}

/**
 * Serves `registry` as Prometheus text on `http://host:port/metrics`. Resolves with the server
 * once listening (port 0 picks a free one: read `server.address()`).
 */
export function serveMetrics(registry: Registry, port: number, host = '0.0.0.0'): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
