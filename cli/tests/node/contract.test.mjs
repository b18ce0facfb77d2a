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

test('UUIDv7 and ULID text sorts in creation order, across requests and milliseconds', async () => {
  for (const [kind, pattern] of [
    ['uuidv7', /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/],
    ['ulid', /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/],
  ]) {
    const issued = [];
    for (let round = 0; round < 5; round++) {
      const viaPost = await fetch(`${base}/v1/ids`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ count: 200, kind }),
      });
      assert.equal(viaPost.status, 200);
      issued.push(...(await viaPost.json()).ids);
      const viaGet = await fetch(`${base}/v1/ids?count=50&kind=${kind}`);
      assert.equal(viaGet.status, 200);
      issued.push(...(await viaGet.json()).ids);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    assert.equal(issued.length, 1250);
    for (const id of issued) assert.match(id, pattern);
    // Plain string comparison, as a JavaScript sort or a database index on text does it.
    const sorted = [...issued].sort();
    assert.deepEqual(sorted, issued, `${kind}: the text order is the order of issue`);
    assert.equal(new Set(issued).size, issued.length);
    // decode gives the kind and the time, and time never goes back along the order.
    let previous = 0;
    for (const id of [issued[0], issued[issued.length - 1]]) {
      const decoded = await (await fetch(`${base}/v1/ids/${id}/decode`)).json();
      assert.equal(decoded.kind, kind);
      const created = new Date(decoded.createdAt).getTime();
      assert.ok(Math.abs(Date.now() - created) < 60_000, decoded.createdAt);
      assert.ok(created >= previous);
      previous = created;
    }
  }
});
