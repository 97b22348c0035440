// A job's page as an operator reaches it (docs/dashboard.md, "Pages" and "Actions"): an address with
// leading zeros is the job's page, and deleting from it goes to the job list as from /jobs/<id>; a
// value cut by the database is described in the characters the database counted; a parent lists
// its children and a child links its parent, each job lists its signals, both a page at a time.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, createDashboardHandler, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

async function withDashboard(fn: (url: string) => Promise<void>): Promise<void> {
  const dashboard = createDashboardHandler({ db, logger: silentLogger });
  const server = http.createServer(dashboard);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** Submits the page's form of `action` as a browser would: its hidden fields, as they are. */
async function submit(url: string, page: string, action: string): Promise<Response> {
  const form = new RegExp(`<form[^>]*action="/actions/${action}">(.*?)</form>`).exec(page)?.[1];
  expect(form).toBeDefined();
  const fields = [...form!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m): [string, string] => [m[1], m[2].replace(/&amp;/g, '&')]);
  return fetch(`${url}/actions/${action}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
}

test('Delete on a job page opened with leading zeros (/jobs/007) goes to the job list, not to the deleted job\'s 404', async () => {
  const client = createClient({ db, force: true });
  const { id } = await client.enqueue('zeros', {}, { runAt: new Date(Date.now() + 3_600_000) });
  await client.cancel(id);
  await withDashboard(async (url) => {
    const opened = await fetch(`${url}/jobs/00${id}?ns=default`);
    expect(opened.status).toBe(200);
    const res = await submit(url, await opened.text(), 'delete');
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/jobs?ns=default&done=delete%3A1');
    expect(await client.getJob(id)).toBeNull();
  });
});

test('a payload cut by the database is said to show 65,536 characters, an emoji one too (not its UTF-16 length)', async () => {
  const { id } = await createClient({ db, force: true }).enqueue('emoji', { e: '😀'.repeat(70_000) }, { runAt: new Date(Date.now() + 3_600_000) });
  await withDashboard(async (url) => {
    const page = await (await fetch(`${url}/jobs/${id}`)).text();
    expect(/<b>cut<\/b>: the first ([0-9,]+) characters shown/.exec(page)?.[1]).toBe('65,536');
  });
});

/** The rows of the page's table `id`, each as its cells' text (tags dropped, entities as they are). */
function rowsOf(page: string, id: string): string[][] {
  const body = new RegExp(`<table id="${id}">.*?<tbody>(.*?)</tbody>`, 's').exec(page)?.[1];
  expect(body).toBeDefined();
  return [...body!.matchAll(/<tr[^>]*>(.*?)<\/tr>/gs)].map((r) => [...r[1].matchAll(/<td[^>]*>(.*?)<\/td>/gs)].map((c) => c[1].replace(/<[^>]+>/g, '').trim()));
}

test("a parent's page lists its children (the one that succeeded too, and the failed one's error); a child's page links its parent, deleted or not; signals show consumed, pending, then not consumed, their payloads escaped", async () => {
  const child = defineJob({ name: 'fam-child', maxAttempts: 1, handler: async (p: { fail: boolean }) => { if (p.fail) throw new Error('child <b>failed</b>'); return 'ok'; } });
  const parent = defineJob({
    name: 'fam-parent',
    handler: async (_p: unknown, ctx) => {
      await ctx.spawnMany([{ definition: child, payload: { fail: false } }, { definition: child, payload: { fail: true } }]);
      await ctx.waitForChildren();
      await ctx.waitForSignal('go');
      return 'done';
    },
  });
  const client = createClient({ db, force: true });
  const worker = createWorker({ db, definitions: [parent, child], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const { id } = await client.enqueue(parent, {});
    await waitFor(async () => (await client.getJob(id))?.status === 'waiting' && (await client.getJob(id))!.executions.length === 2, 'the parent waits for its signal');
    await client.signal(id, 'note', { html: '</code><script>alert(1)</script>' }, { idempotencyKey: '<k&1>' });
    await withDashboard(async (url) => {
      const page = await (await fetch(`${url}/jobs/${id}?ns=default`)).text();
      const children = rowsOf(page, 'children');
      expect(children.map((c) => [c[1], c[2]])).toEqual([['fam-child', 'succeeded'], ['fam-child', 'failed']]);
      expect(children[1][5]).toBe('child &lt;b&gt;failed&lt;/b&gt;');
      expect(children.every((c) => c[4] !== '')).toBe(true); // finished
      const [okId, failedId] = [...page.matchAll(/<tr data-job="([0-9]+)"/g)].map((m) => m[1]);
      expect(page).toContain(`<a href="/jobs/${okId}?ns=default">${okId}</a>`);
      expect(page).toContain('2 child jobs, in the order spawned');
      // The child that succeeded stayed in acta.jobs (its parent reads it there): the page's read depends on it.
      expect((await db.query('select 1 from acta.jobs where id = $1 and status = $2', [okId, 'succeeded'])).rows).toHaveLength(1);
      expect(rowsOf(page, 'signals')).toEqual([['note', expect.stringMatching(/^20/), 'pending', '&lt;k&amp;1&gt;', '{&quot;html&quot;: &quot;&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;&quot;}']]);
      expect(page).not.toContain('<script>');
      expect(page).toContain('1 signal, 1 pending');

      const childPage = await (await fetch(`${url}/jobs/${failedId}?ns=default`)).text();
      expect(/<dd id="parent">(.*?)<\/dd>/.exec(childPage)?.[1]).toBe(`<a href="/jobs/${id}?ns=default">${id}</a> fam-parent <span class="s s-waiting">waiting</span>`);
      expect(rowsOf(childPage, 'children')).toEqual([]);
      expect(childPage).toContain('0 child jobs');
      expect(childPage).toContain('0 signals');
    });

    await client.signal(id, 'go', 7);
    expect(await client.result(id, { timeoutMs: 10_000 })).toBe('done');
    await withDashboard(async (url) => {
      const page = await (await fetch(`${url}/jobs/${id}`)).text();
      const signals = rowsOf(page, 'signals');
      expect(signals.map((s) => [s[0], s[2].replace(/^[0-9-]+ [0-9:]+/, '<time>')])).toEqual([['note', 'not consumed'], ['go', expect.stringMatching(/^<time> by step /)]]);
      expect(signals[1][4]).toBe('7');
      expect(page).toContain('2 signals, 1 not consumed');
      // A parent deleted leaves its children their parent's id: the link stays, saying so.
      const childId = /<tr data-job="([0-9]+)"/.exec(page)![1];
      expect(await client.deleteJobs({ ids: [id] })).toEqual([id]);
      const orphan = await (await fetch(`${url}/jobs/${childId}`)).text();
      expect(/<dd id="parent">(.*?)<\/dd>/.exec(orphan)?.[1]).toBe(`<a href="/jobs/${id}?ns=default">${id}</a> <span class="note">(deleted)</span>`);
    });
  } finally {
    await worker.stop();
  }
});

test("a parent's 120 children and a job's 60 signals come 50 a page by keyset, each page's links keeping the other list's place; a long payload is cut; a cursor that is no id is a 400", async () => {
  const client = createClient({ db, force: true });
  const later = { runAt: new Date(Date.now() + 3_600_000) };
  const { id } = await client.enqueue('fam-big', {}, later);
  const children = await client.enqueueMany(Array.from({ length: 120 }, (_, i) => ({ definition: 'fam-big-child', payload: { i }, ...later })));
  await db.query('update acta.jobs set parent_id = $1 where id = any ($2::bigint[])', [id, children.map((c) => c.id)]);
  for (let i = 0; i < 60; i++) await client.signal(id, `s${i}`, i === 0 ? { i, pad: 'é'.repeat(3000) } : { i });
  await withDashboard(async (url) => {
    const seen: string[] = [];
    let next: string | undefined = `/jobs/${id}?ns=default&signals=`;
    let firstSignals: string[][] = [];
    while (next !== undefined) {
      const page = await (await fetch(`${url}${next.replace(/&amp;/g, '&')}`)).text();
      seen.push(...[...page.matchAll(/<tr data-job="([0-9]+)"/g)].map((m) => m[1]));
      if (firstSignals.length === 0) firstSignals = rowsOf(page, 'signals');
      expect(page).toContain('120 child jobs');
      next = /<a id="children-next" href="([^"]+)"/.exec(page)?.[1];
    }
    expect(seen).toEqual(children.map((c) => c.id));
    expect(firstSignals.map((s) => s[0])).toEqual(Array.from({ length: 50 }, (_, i) => `s${i}`));
    // A payload is cut by the database to 2,048 characters (code points), as a step's result, with its whole size.
    expect(firstSignals[0][4]).toBe(`{&quot;i&quot;: 0, &quot;pad&quot;: &quot;${'é'.repeat(2048 - 17)} (cut; 5.9 KiB)`);

    // The signals' next page keeps the children's place.
    const second = await (await fetch(`${url}/jobs/${id}?ns=default&children=${children[49].id}`)).text();
    const signalsNext = /<a id="signals-next" href="([^"]+)"/.exec(second)?.[1]?.replace(/&amp;/g, '&');
    const lastSignal = [...second.matchAll(/<tr data-signal="([0-9]+)"/g)].map((m) => m[1]).at(-1);
    expect(signalsNext).toBe(`/jobs/${id}?ns=default&children=${children[49].id}&signals=${lastSignal}`);
    const last = await (await fetch(`${url}${signalsNext}`)).text();
    expect(rowsOf(last, 'signals').map((s) => s[0])).toEqual(Array.from({ length: 10 }, (_, i) => `s${50 + i}`));
    expect([...last.matchAll(/<tr data-job="([0-9]+)"/g)].map((m) => m[1])).toEqual(children.slice(50, 100).map((c) => c.id));
    expect(last).not.toContain('id="signals-next"');
    expect(last).toContain('60 signals, 60 pending');

    const bad = await fetch(`${url}/jobs/${id}?children=1%20or%201=1`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('children must be the id its &quot;next page&quot; link gives, got &quot;1 or 1=1&quot;');
  });
});
