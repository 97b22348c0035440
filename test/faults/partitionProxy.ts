/**
 * A TCP proxy of the test's own that plays a SILENT network partition between its clients and a
 * PostgreSQL server (a cloud NAT that timed the flow out, a cable pulled): on `partition()` it stops
 * forwarding bytes both ways and keeps every socket open, so neither end hears an error, a FIN or a
 * reset; connections opened meanwhile are accepted and never forwarded. `heal('new')` forwards
 * again for connections opened from then on only (the NAT's mappings are gone: the old flows stay
 * silent for good); `heal('all')` also lets the old ones go on where they stopped (TCP retransmits
 * what was held). Traffic goes to 127.0.0.1 only.
 */
import * as net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  frozen: boolean;
  /** Client bytes read as the pair froze: sent on a heal of all. */
  held: Buffer[];
  heldDown: Buffer[];
  chunks: number;
}

export interface PartitionProxy {
  readonly port: number;
  /** `url` with its host:port replaced by the proxy's. */
  through(url: string): string;
  partition(): void;
  heal(which: 'new' | 'all'): void;
  /** Partitions at the first query any connection sends after its startup (that query is held): a client cut off after it connected. */
  partitionAtFirstQuery(): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startPartitionProxy(targetPort: number): Promise<PartitionProxy> {
  const pairs = new Set<Pair>();
  let partitioned = false;
  let accepted = 0;
  let atFirstQuery = false;
  const freeze = (pair: Pair) => {
    pair.frozen = true;
    pair.client.pause();
    pair.upstream.pause();
  };
  const thaw = (pair: Pair) => {
    pair.frozen = false;
    for (const chunk of pair.held.splice(0)) pair.upstream.write(chunk);
    for (const chunk of pair.heldDown.splice(0)) pair.client.write(chunk);
    pair.client.resume();
    pair.upstream.resume();
  };
  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair: Pair = { client, upstream, frozen: false, held: [], heldDown: [], chunks: 0 };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      // Past the startup message (no type byte), 'Q' is a simple query and 'P' a Parse.
      if (atFirstQuery && pair.chunks > 0 && (chunk[0] === 0x51 || chunk[0] === 0x50)) {
        atFirstQuery = false;
        partition();
      }
      pair.chunks++;
      if (pair.frozen) pair.held.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pair.frozen) pair.heldDown.push(chunk);
      else client.write(chunk);
    });
    // An end or error crosses only while the pair forwards: a silent network carries no FIN or RST.
    const gone = (other: net.Socket) => () => {
      if (pair.frozen) return;
      pairs.delete(pair);
      other.destroy();
    };
    client.on('close', gone(upstream));
    upstream.on('close', gone(client));
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    if (partitioned) freeze(pair);
  });
  const partition = () => {
    partitioned = true;
    for (const pair of pairs) freeze(pair);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    through: (url) => url.replace(/@([^/@]*):(\d+)\//, `@127.0.0.1:${port}/`),
    partition,
    partitionAtFirstQuery() {
      atFirstQuery = true;
    },
    heal(which) {
      partitioned = false;
      if (which === 'all') for (const pair of pairs) thaw(pair);
    },
    get accepted() {
      return accepted;
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A proxy to `server` for each test of the file, started before it and closed after it (as
 * useFaultServer does for the server): `proxy()` is the current test's.
 */
export function usePartitionProxy(server: { port: number }): () => PartitionProxy {
  let current: PartitionProxy | undefined;
  beforeEach(async () => {
    current = await startPartitionProxy(server.port);
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  return () => {
    if (!current) throw new Error('usePartitionProxy: no proxy outside a test');
    return current;
  };
}
