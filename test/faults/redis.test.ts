// Redis wakeups across a Redis server that is down at the worker's start and restarted while it
// runs (docs/reference.md, "Redis wakeups"), on a redis-server of this test's own (the shared one
// is never stopped). The worker does not LISTEN and its safety poll is 60 s: a job run well before
// that was woken by Redis. Its client gives up a queued command after one retry
// (maxRetriesPerRequest: 1), as a down server past ioredis' default 20 (about 70 s) would.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as net from 'node:net';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createClient, createWorker, defineJob, redisPublisher } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A redis-server on `port`, answering PING. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await waitFor(async () => {
      try {
        if (probe.status !== 'ready') await probe.connect();
        return (await probe.ping()) === 'PONG';
      } catch {
        return false;
      }
    }, 'redis-server to answer', 10_000, 50);
  } finally {
    probe.disconnect();
  }
  return child;
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
}

it('Redis down at the start, then restarted: the worker subscribes at its first connect and again after the restart, and each wakeup runs its job', async () => {
  if (!hasRedisServer()) {
    if (process.env.CI) throw new Error('redis-server is not on PATH');
    console.warn('skipping the Redis restart check: no redis-server on PATH; CI always runs it');
    return;
  }
  const port = await freePort();
  const namespace = `redis-${randomUUID()}`;
  const logs: { msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const redis = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  redis.on('error', () => undefined);
  const ran: string[] = [];
  const job = defineJob({ name: 'woken', handler: (p: { n: string }) => void ran.push(p.n) });
  const worker = createWorker({ db, namespace, definitions: [job], logger, listen: false, safetyPollMs: 60_000, redis });
  const client = createClient({ db, namespace, publishWakeup: redisPublisher(redis) });
  let server: ChildProcess | undefined;
  const subscribers = async () => {
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      const [, n] = (await probe.pubsub('NUMSUB', `acta:wakeup:${namespace}`)) as [string, number];
      return Number(n);
    } catch {
      return 0;
    } finally {
      probe.disconnect();
    }
  };
  await worker.start();
  try {
    await waitFor(() => logs.some((l) => l.msg.startsWith('Redis SUBSCRIBE at start failed')), 'the SUBSCRIBE queued while Redis is down to fail');
    server = await startRedis(port);
    await waitFor(async () => (await subscribers()) === 1, 'the worker to subscribe once Redis is up');
    await client.enqueue(job, { n: 'after the first connect' });
    await waitFor(() => ran.length === 1, 'the job woken by Redis', 20_000);

    await stopRedis(server);
    server = await startRedis(port);
    await waitFor(async () => (await subscribers()) === 1, 'the worker to subscribe again after the restart');
    await client.enqueue(job, { n: 'after the restart' });
    await waitFor(() => ran.length === 2, 'the job woken by Redis after the restart', 20_000);
    expect(ran).toEqual(['after the first connect', 'after the restart']);
  } finally {
    await worker.stop();
    redis.disconnect();
    if (server) await stopRedis(server);
  }
}, 90_000);
