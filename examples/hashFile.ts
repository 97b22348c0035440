import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { defineJob } from '../src';

/** Payload of `hash-file`: an absolute file path. */
export interface HashFilePayload {
  path: string;
}

/** Result of `hash-file`: the file's SHA-256 (hex) and size in bytes. */
export interface HashFileResult {
  sha256: string;
  bytes: number;
}

/**
 * The demo's job: stream a file through SHA-256. Honours its AbortSignal (the stream is
 * destroyed when the attempt is cancelled). Run it in a worker with
 * `npx acta worker dist/examples/hashFile.js`.
 */
export const hashFile = defineJob<HashFilePayload, HashFileResult>({
  name: 'hash-file',
  maxAttempts: 3,
  backoff: { delayMs: 200 },
  timeoutMs: 60_000,
  async handler({ path }, { signal }) {
    const hash = createHash('sha256');
    let bytes = 0;
    await pipeline(
      createReadStream(path),
      async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          bytes += chunk.length;
          hash.update(chunk);
        }
      },
      { signal },
    );
    return { sha256: hash.digest('hex'), bytes };
  },
});

export const definitions = [hashFile];
