// A worker's Prometheus metrics as a scrape of a fresh worker reads them (src/worker/metrics.ts;
// docs/operating.md, "Metrics"): every labelled counter has a series per known label value at 0
// before its first event, so rate() and alerts on it see a series from the start.
import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import { ConfigError, createWorker, defineJob } from '../src';
import { injectFaults, memoryLedger, VirtualClock } from '../src/testing';
import { JOBS_TTL_MS } from '../src/worker/metrics';

test("a fresh worker's metrics list acta_completions_total for every outcome and acta_recovered_jobs_total for charged true and false, at 0", async () => {
  const job = defineJob({ name: 'job', handler: () => undefined });
  const worker = createWorker({ ledger: memoryLedger(), definitions: [job], logger: pino({ level: 'silent' }), listen: false });
  const text = await worker.metrics.registry.metrics();
  const series = (name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`));
  const outcomes = ['succeeded', 'failed', 'failed_final', 'handed_back', 'expired', 'rate_limited', 'cancelled', 'skipped', 'signal_wait', 'children_wait'];
  expect(series('acta_completions_total').sort()).toEqual(outcomes.map((o) => `acta_completions_total{outcome="${o}"} 0`).sort());
  expect(series('acta_recovered_jobs_total').sort()).toEqual(['acta_recovered_jobs_total{charged="false"} 0', 'acta_recovered_jobs_total{charged="true"} 0']);
  // A counted event adds to its series, not a second one.
  worker.metrics.completions.inc({ outcome: 'succeeded' }, 2);
  expect((await worker.metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('acta_completions_total{outcome="succeeded"}'))).toEqual(['acta_completions_total{outcome="succeeded"} 2']);
});

test('acta_jobs while the jobs cannot be counted: no series (absent, not 0), and the rest of the scrape is served', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const job = defineJob({ name: 'job', handler: () => undefined });
  const worker = createWorker({ ledger: faults.ledger, definitions: [job], logger: pino({ level: 'silent' }), listen: false, scheduler: clock.scheduler });
  faults.fail('countJobs', { times: 1 });
  const scrape = worker.metrics.registry.metrics();
  await clock.advance(0);
  const text = await scrape;
  expect(text.split('\n').filter((l) => l.startsWith('acta_jobs{'))).toEqual([]);
  expect(text).toContain('acta_completions_total{outcome="succeeded"} 0');
  // The next read, a TTL later, counts again.
  await clock.advance(JOBS_TTL_MS);
  const next = worker.metrics.registry.metrics();
  await clock.advance(0);
  expect((await next).split('\n').filter((l) => l.startsWith('acta_jobs{')).sort()).toEqual(
    ['executing', 'ready', 'waiting'].map((status) => `acta_jobs{namespace="default",definition="job",status="${status}"} 0`),
  );
});

test('acta_alert while the alerts cannot be read: no series, and the rest of the scrape is served (acta_worker_degraded among it)', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const job = defineJob({ name: 'job', handler: () => undefined });
  const worker = createWorker({ ledger: faults.ledger, definitions: [job], logger: pino({ level: 'silent' }), listen: false, scheduler: clock.scheduler, alerts: true });
  faults.fail('readAlerts', { times: 1 });
  const scrape = worker.metrics.registry.metrics();
  await clock.advance(0);
  const text = await scrape;
  expect(text.split('\n').filter((l) => l.startsWith('acta_alert{'))).toEqual([]);
  expect(text).toContain('# TYPE acta_alert gauge');
  expect(text).toMatch(/^acta_worker_degraded/m);
});

test('a shared metricsRegistry: a worker leaves it when it has ended (stopped, never started, or failed to start), so the next one registers; a second live worker is refused with ConfigError and registers nothing', async () => {
  const job = defineJob({ name: 'job', handler: () => undefined });
  const metricsRegistry = new Registry();
  const mine = new Counter({ name: 'app_requests_total', help: 'the application\'s own', registers: [metricsRegistry] });
  const make = (options: { alerts?: boolean; ledger?: ReturnType<typeof memoryLedger> } = {}) => createWorker({ ledger: options.ledger ?? memoryLedger(), definitions: [job], logger: pino({ level: 'silent' }), listen: false, metricsRegistry, alerts: options.alerts });
  const names = () => metricsRegistry.getMetricsAsArray().map((m) => m.name).sort();

  const first = make({ alerts: true });
  await first.start();
  expect(names()).toContain('acta_alert');
  // A second worker while the first runs: refused whole, the first's metrics untouched.
  expect(() => make()).toThrow(ConfigError);
  expect(() => make()).toThrow(/metricsRegistry: a metric named acta_\w+ is registered there already/);
  await first.stop();
  expect(names()).toEqual(['app_requests_total']);

  // Stopped and created again in the same process (no "already been registered").
  const again = make();
  await again.start();
  expect(names()).toContain('acta_jobs_inflight');
  await again.stop();
  // One never started, stopped.
  await make().stop();
  // One whose start failed (a schema not migrated is as final: here a ledger that refuses the registration).
  const broken = memoryLedger();
  const failing = make({ ledger: Object.assign(Object.create(broken), { registerWorker: () => Promise.reject(new ConfigError('refused')) }) });
  await expect(failing.start()).rejects.toThrow('refused');
  expect(names()).toEqual(['app_requests_total']);
  expect(metricsRegistry.getSingleMetric('app_requests_total')).toBe(mine);
});
