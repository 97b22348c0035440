export default async function globalTeardown() {
  await globalThis.__ACTA_TEST_SERVER__?.destroy();
}
