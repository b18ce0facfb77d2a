// The JSON contract, as a JavaScript client sees it: IDs are strings, so JSON.parse keeps
// every digit, even though the values are far above 2^53 (Number.MAX_SAFE_INTEGER).
// Run by cli/tests/http.rs with IDGEN_URL pointing at a running `idgen serve`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const base = process.env.IDGEN_URL;

test('POST /v1/ids returns IDs as decimal strings that JSON.parse keeps exactly', async () => {
  const response = await fetch(`${base}/v1/ids`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ count: 100 }),
  });
  assert.equal(response.status, 200);
  const text = await response.text();
  const { ids } = JSON.parse(text);
  assert.equal(ids.length, 100);
  for (const id of ids) {
    assert.equal(typeof id, 'string');
    assert.match(id, /^[1-9][0-9]*$/);
    // Above 2^53: as a Number it would have been rounded.
    assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER));
    // The exact digits of the raw body survive the parse.
    assert.ok(text.includes(`"${id}"`));
  }
  const big = ids.map(BigInt);
  for (let i = 1; i < big.length; i++) assert.ok(big[i] > big[i - 1]);
});

test('GET /v1/ids?n= and decode round-trip through JavaScript', async () => {
  const { ids } = await (await fetch(`${base}/v1/ids?n=1`)).json();
  const decoded = await (await fetch(`${base}/v1/ids/${ids[0]}/decode`)).json();
  assert.equal(decoded.id, ids[0]);
  assert.equal(typeof decoded.worker, 'number');
  const created = new Date(decoded.createdAt);
  assert.ok(Math.abs(Date.now() - created.getTime()) < 60_000, decoded.createdAt);
  // The time field of the ID is milliseconds since 2024-01-01T00:00:00Z.
  const epoch = Date.UTC(2024, 0, 1);
  assert.equal(Number(BigInt(ids[0]) >> 22n) + epoch, created.getTime());
});

test('bad input gets a 400 with an error message', async () => {
  const response = await fetch(`${base}/v1/ids?count=0`);
  assert.equal(response.status, 400);
  const body = await response.json();
  assert.equal(typeof body.error, 'string');
});
