// The declarations (index.d.ts) checked by TypeScript in strict mode against the packed
// package, by the test command: a program using the whole API compiles, and misuses do not
// (each @ts-expect-error must meet an error).
import { Client, IdgenError, LeasedGenerator, systemClock } from 'idgen-client';
import type { Clock, Decoded, Kind, LeaseTerms, Layout } from 'idgen-client';

export async function use(url: string, token: string): Promise<bigint> {
  const client = new Client(url, { token, retries: 2, backoffMs: 50, maxWaitMs: 1000, timeoutMs: 5000 });
  const ids: bigint[] = await client.ids(1000);
  const uuids: string[] = await client.ids(10, 'uuidv7');
  const ulids: string[] = await client.ids(10, 'ulid');
  const kind: Kind = ulids.length > 0 ? 'ulid' : 'snowflake';
  const either: bigint[] | string[] = await client.ids(10, kind);
  const refusal = new IdgenError('idgen: made up', { status: 503, code: 'http' });
  // @ts-expect-error: Snowflake IDs are bigints, never numbers (precision is lost above 2^53)
  const lossy: number[] = await client.ids(10);
  // @ts-expect-error: no such kind
  await client.ids(10, 'uuidv4');
  const decoded: Decoded = await client.decode(ids[0]);
  const layout: Layout = await client.layout();
  const { response, sentMono, receivedMono } = await client.timedRequest('GET', '/healthz', undefined, {
    retries: 0,
  });
  const clock: Clock = { now: () => Date.now(), monotonic: () => systemClock.monotonic() };
  const generator = await LeasedGenerator.lease(url, { token, holder: 'types', handleSignals: false, clock });
  const terms: LeaseTerms = generator.terms;
  const state: 'valid' | 'expired' | 'lost' | 'closed' = generator.state;
  // @ts-expect-error: a lease needs the token
  await LeasedGenerator.lease(url, {});
  let id: bigint = generator.nextId();
  try {
    id = generator.nextIds(10)[9];
  } catch (error) {
    if (error instanceof IdgenError && (error.code === 'not-yet' || error.status === 503)) id = 0n;
  }
  await generator.close();
  void [uuids, ulids, either, refusal, lossy, decoded, layout, response.status, sentMono, receivedMono, terms, state];
  return id;
}
