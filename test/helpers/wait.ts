/** Polls `probe` every `everyMs` until it returns a truthy value; throws after `timeoutMs` with `what`. */
export async function waitFor<T>(probe: () => Promise<T> | T, what: string, timeoutMs = 20_000, everyMs = 25): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
