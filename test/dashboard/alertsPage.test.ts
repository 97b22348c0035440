// The Alerts page says above its table what `acta alerts` says under its own when nothing evaluates
// the namespace's rules (src/ops/alertsNotes.ts: one read, one wording): sys.alerts not scheduled,
// its schedule paused, its fires held by an acta pause, no live worker running it, or its fire late
// though a live worker runs it; escaped as every value of the page. Before, the page said only
// "Evaluated every 30 s", most misleading exactly when nothing evaluated.
import { randomUUID } from 'node:crypto';
import { createClient, createWorker, defineJob } from '../../src';
import { registerWorker } from '../../src/db/workers';
import { ALERTS_FIRE_LATE_MS, alertsNotes } from '../../src/ops/alertsNotes';
import { escapeHtml } from '../../src/ops/dashboard/html';
import { startDashboard } from '../../src/ops/dashboard/server';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase();

test('the Alerts page shows the notes of acta alerts, escaped: not scheduled, paused, held by a pause, no live worker, late', async () => {
  // A namespace with markup in its name: shown as text wherever the page names it.
  const ns = `notes <b>&"'${randomUUID().slice(0, 8)}`;
  const client = createClient({ db, namespace: ns });
  const dashboard = await startDashboard({ db, port: 0, logger: silentLogger });
  const stale = 'no rule is evaluated, and these alerts are as its last evaluation left them';
  /** The page's notes are alertsNotes' texts, escaped, and those texts are `texts`. */
  const expectNotes = async (texts: string[]) => {
    const page = await (await fetch(`${dashboard.url}/alerts?ns=${encodeURIComponent(ns)}`)).text();
    expect(page).not.toContain('<b>&');
    expect([...page.matchAll(/<p class="warn" role="status" data-note>([^<]*)<\/p>/g)].map((m) => m[1])).toEqual(texts.map(escapeHtml));
    expect(await alertsNotes(db, ns)).toEqual(texts);
  };
  try {
    await expectNotes([`sys.alerts is not scheduled in namespace "${ns}": no worker has run it there (acta worker --alerts), so no rule is evaluated`]);

    // A worker with alerts runs: no note. Its schedule paused, or its fires held by a pause of the
    // namespace or of sys.alerts: each said, with what lifts it.
    const evaluator = createWorker({ db, namespace: ns, definitions: [defineJob({ name: 'notes-noop', handler: () => undefined })], logger: silentLogger, alerts: true });
    await evaluator.start();
    await expectNotes([]);
    await client.schedules.pause('sys.alerts');
    await expectNotes([`sys.alerts is paused in namespace "${ns}" (acta schedule resume sys.alerts): no rule is evaluated`]);
    await client.schedules.resume('sys.alerts');
    await client.pause({ reason: 'notes' });
    await expectNotes([`namespace "${ns}" is paused, and sys.alerts' fires with it (acta resume): ${stale}`]);
    await client.resume();
    await client.pause({ definition: 'sys.alerts' });
    await expectNotes([`the jobs of sys.alerts are paused in namespace "${ns}" (acta resume --definition sys.alerts): ${stale}`]);
    await client.resume({ definition: 'sys.alerts' });
    await expectNotes([]);

    // Its last worker stopped: none live, since its stop.
    await evaluator.stop();
    const { rows: [stopped] } = await db.query<{ stopped_at: Date }>('select stopped_at from acta.workers where id = $1', [evaluator.id]);
    await expectNotes([`no live worker has run sys.alerts in namespace "${ns}" since ${stopped.stopped_at.toISOString()} (acta worker --alerts starts one): ${stale}`]);

    // A live worker declares it (beating now), and its armed fire is Ready: late once it waited
    // more than ALERTS_FIRE_LATE_MS past its due time, not before (the fire's run_at set back, as
    // the time passing while every slot of that worker is busy would leave it).
    const declare = (build: string) =>
      registerWorker(db, { workerId: randomUUID(), namespace: ns, hostname: 'notes', pid: 1, definitions: ['sys.alerts'], maxAttempts: [1], leaseMs: 60_000, build, policies: {} });
    await declare('one');
    const { rows: [fire] } = await db.query<{ id: string; status: string }>(
      `select j.id, j.status from acta.schedules s join acta.jobs j on j.id = s.job_id where s.namespace = $1 and s.name = 'sys.alerts'`,
      [ns],
    );
    expect(fire.status).toBe('ready');
    const dueAgo = async (ms: number) =>
      (await db.query<{ run_at: Date }>(`update acta.jobs set run_at = now() - $2 * interval '1 millisecond' where id = $1 returning run_at`, [fire.id, ms])).rows[0].run_at;
    await dueAgo(ALERTS_FIRE_LATE_MS - 5_000);
    await expectNotes([]);
    let due = await dueAgo(ALERTS_FIRE_LATE_MS + 1_000);
    const late = (they: string) => `sys.alerts is late in namespace "${ns}": its fire due at ${due.toISOString()} is not claimed yet, more than 60 s later, though ${they}: ${stale}`;
    await expectNotes([late('1 live worker runs it (all its slots busy, or its claims failing)')]);
    await declare('two');
    due = await dueAgo(ALERTS_FIRE_LATE_MS + 1_000);
    await expectNotes([late('2 live workers run it (all their slots busy, or their claims failing)')]);
    // A pause holding it says why instead.
    await client.pause({ definition: 'sys.alerts' });
    await expectNotes([`the jobs of sys.alerts are paused in namespace "${ns}" (acta resume --definition sys.alerts): ${stale}`]);
  } finally {
    await dashboard.close();
  }
});
