// The Alerts page says above its table what `acta alerts` says under its own when nothing evaluates
// the namespace's rules (src/ops/alertsNotes.ts: one read, one wording): sys.alerts not scheduled,
// its schedule paused, or no live worker running it; escaped as every value of the page. Before,
// the page said only "Evaluated every 30 s", most misleading exactly when nothing evaluated.
import { randomUUID } from 'node:crypto';
import { createClient, createWorker, defineJob } from '../../src';
import { alertsNotes } from '../../src/ops/alertsNotes';
import { escapeHtml } from '../../src/ops/dashboard/html';
import { startDashboard } from '../../src/ops/dashboard/server';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase();

test('the Alerts page shows the notes of acta alerts, escaped: not scheduled, paused, no live worker', async () => {
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

    // A worker with alerts runs: no note. Its schedule paused: said, with what lifts it.
    const evaluator = createWorker({ db, namespace: ns, definitions: [defineJob({ name: 'notes-noop', handler: () => undefined })], logger: silentLogger, alerts: true });
    await evaluator.start();
    await expectNotes([]);
    await client.schedules.pause('sys.alerts');
    await expectNotes([`sys.alerts is paused in namespace "${ns}" (acta schedule resume sys.alerts): no rule is evaluated`]);
    await client.schedules.resume('sys.alerts');
    await expectNotes([]);

    // Its last worker stopped: none live, since its stop.
    await evaluator.stop();
    const { rows: [stopped] } = await db.query<{ stopped_at: Date }>('select stopped_at from acta.workers where id = $1', [evaluator.id]);
    await expectNotes([`no live worker has run sys.alerts in namespace "${ns}" since ${stopped.stopped_at.toISOString()} (acta worker --alerts starts one): ${stale}`]);
  } finally {
    await dashboard.close();
  }
});
