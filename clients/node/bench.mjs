// How fast the package makes IDs: `node bench.mjs <url> <token file>`.
// Prints one JSON line: localIdsPerS (a leased generator's nextId() in a loop),
// localBatchIdsPerS (its nextIds(1000)), httpIdsPerS (Client.ids(1000) in a loop), about
// 3 s each, and the local/HTTP ratio. benches/clients.sh runs it beside the Python one.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Client, IdgenError, LeasedGenerator } from './index.js';

const SECONDS = 3;
const [url, tokenFile] = process.argv.slice(2);
if (tokenFile === undefined) {
  console.error('usage: node bench.mjs <url> <token file>');
  process.exit(2);
}
const token = readFileSync(tokenFile, 'utf8').trim();

async function rate(run) {
  let count = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  for (;;) {
    count += await run();
    const now = performance.now();
    if (now >= end) return (count * 1000) / (now - start);
  }
}

const generator = await LeasedGenerator.lease(url, { token, holder: `bench pid ${process.pid}` });
// Wait for the previous holder's term to end.
for (;;) {
  try {
    generator.nextId();
    break;
  } catch (error) {
    if (!(error instanceof IdgenError) || error.code !== 'not-yet') throw error;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
let sink = 0n;
const local = await rate(async () => {
  for (let i = 0; i < 100_000; i += 1) sink ^= generator.nextId();
  // Let the renewals run.
  await new Promise((resolve) => setImmediate(resolve));
  return 100_000;
});
const localBatch = await rate(async () => {
  for (let i = 0; i < 100; i += 1) sink ^= generator.nextIds(1000)[999];
  await new Promise((resolve) => setImmediate(resolve));
  return 100_000;
});
await generator.close();
const client = new Client(url);
const http = await rate(async () => (await client.ids(1000)).length);
console.log(
  JSON.stringify({
    localIdsPerS: Math.round(local),
    localBatchIdsPerS: Math.round(localBatch),
    httpIdsPerS: Math.round(http),
    localOverHttp: Math.round((local / http) * 10) / 10,
    sink: String(sink & 1n),
  }),
);
