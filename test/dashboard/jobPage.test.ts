// A job's page as an operator reaches it (docs/dashboard.md, "Pages" and "Actions"): an address with
// leading zeros is the job's page, and deleting from it goes to the job list as from /jobs/<id>; a
// value cut by the database is described in the characters the database counted.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, createDashboardHandler } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

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
