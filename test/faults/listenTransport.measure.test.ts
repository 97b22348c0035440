// Trial measurement (reverted in the next commit): the own listener (src/db/pgListenerOwn.ts, a copy) vs pg-listen in the watchdog (src/db/pgListener.ts).
import { Client } from 'pg';
import createPostgresSubscriber from 'pg-listen';
import { listenOnOwnConnection as own } from '../../src/db/pgListenerOwn';
import { listenOnOwnConnection as trial } from '../../src/db/pgListener';
import { useFaultServer } from './harness';

const server = useFaultServer();
const impls = { own, trial } as const;
const out: Record<string, unknown> = {};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const backends = async () => (await server.query<{ pid: number }>(`select pid from pg_stat_activity where datname = 'acta_fault' and application_name = 'acta listener'`)).map((r) => r.pid);

function watch() {
  const ev = { notes: [] as [string, number][], downs: [] as number[], connects: [] as number[] };
  return { ev, handlers: { onNotify: (p: string) => ev.notes.push([p, performance.now()]), onDown: () => ev.downs.push(performance.now()), onConnect: () => ev.connects.push(performance.now()) } };
}
async function until(f: () => boolean, ms: number) {
  const end = performance.now() + ms;
  while (!f()) {
    if (performance.now() > end) return false;
    await sleep(5);
  }
  return true;
}

for (const [name, listen] of Object.entries(impls)) {
  test(`${name}: latency, terminate, close while reconnecting, SIGSTOP`, async () => {
    const r: Record<string, unknown> = {};
    const { ev, handlers } = watch();
    const stop = await listen({ connectionString: server.dbUrl }, 'acta_m', handlers);
    const sender = new Client({ connectionString: server.dbUrl });
    await sender.connect();
    // wakeup latency: NOTIFY committed -> onNotify
    const lat: number[] = [];
    for (let i = 0; i < 300; i++) {
      const n = ev.notes.length;
      const t0 = performance.now();
      await sender.query(`select pg_notify('acta_m', $1)`, [String(i)]);
      await until(() => ev.notes.length > n, 2000);
      lat.push(ev.notes[ev.notes.length - 1][1] - t0);
    }
    r.latencyMs = { p50: pct(lat, 0.5), p90: pct(lat, 0.9), p99: pct(lat, 0.99) };
    // terminate -> down, -> connected again
    const term: number[] = [];
    for (let i = 0; i < 5; i++) {
      const [pid] = await backends();
      const c = ev.connects.length;
      const t0 = performance.now();
      await server.query(`select pg_terminate_backend(${pid})`);
      await until(() => ev.connects.length > c, 10_000);
      term.push(ev.connects[ev.connects.length - 1] - t0);
      await sleep(300);
    }
    r.terminateToConnectedMs = term.map(Math.round);
    // SIGSTOP -> down -> connected (defaults 10 s / 5 s)
    const [pid] = await backends();
    const d = ev.downs.length;
    const c = ev.connects.length;
    process.kill(pid, 'SIGSTOP');
    const t0 = performance.now();
    try {
      await until(() => ev.downs.length > d && ev.connects.length > c, 30_000);
      r.sigstopFoundMs = Math.round(ev.downs[d] - t0);
      r.sigstopConnectedMs = Math.round(ev.connects[c] - t0);
      r.backendsWhileStopped = (await backends()).length;
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await sleep(500);
    // close right after a terminate (while reconnecting): connections left behind
    const left: number[] = [];
    for (const wait of [0, 20, 100]) {
      await stop2(listen, wait, left);
    }
    r.leftAfterCloseWhileReconnecting = left;
    await stop();
    await sleep(3000);
    r.backendsAfterFinalClose = (await backends()).length;
    await sender.end();
    out[name] = r;
    console.log(name, JSON.stringify(r));
  }, 180_000);
}

async function stop2(listen: typeof own, _wait: number, left: number[]) {
  // a second listener: terminate its backend, close it at once, count what is left
  const s = await listen({ connectionString: server.dbUrl }, 'acta_m2', { onNotify: () => undefined });
  const before = new Set(await backends());
  const mine = (await server.query<{ pid: number }>(`select pid from pg_stat_activity where datname = 'acta_fault' and application_name = 'acta listener' and query ilike '%acta_m2%'`)).map((r) => r.pid);
  await server.query(`select pg_terminate_backend(pid) from unnest($1::int[]) pid`, [mine]);
  await sleep(_wait);
  await s();
  await sleep(3000);
  const after = (await server.query<{ n: number }>(`select count(*)::int n from pg_stat_activity where datname = 'acta_fault' and application_name = 'acta listener' and query ilike '%acta_m2%'`))[0].n;
  left.push(after);
  void before;
}

test('pg-listen alone: close() while it reconnects', async () => {
  const left: number[] = [];
  for (const wait of [0, 20, 100, 300]) {
    const sub = createPostgresSubscriber({ connectionString: server.dbUrl, application_name: 'plain pg-listen' }, { retryTimeout: Infinity });
    sub.events.on('error', () => undefined);
    await sub.connect();
    await sub.listenTo('acta_plain');
    await server.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'plain pg-listen'`);
    await sleep(wait);
    await sub.close().catch(() => undefined);
    await sleep(3000);
    left.push((await server.query<{ n: number }>(`select count(*)::int n from pg_stat_activity where application_name = 'plain pg-listen'`))[0].n);
  }
  console.log('plain', JSON.stringify({ leftAfterCloseWhileReconnecting: left }));
  await server.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'plain pg-listen'`);
}, 60_000);
