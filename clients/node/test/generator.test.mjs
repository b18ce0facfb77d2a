// The leased generator's bit maths and clock rules on a fake clock, without a service:
//   node --test clients/node/test/generator.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import { Client, IdgenError, LeasedGenerator } from '../index.js';

const EPOCH_MS = 1_704_067_200_000; // 2024-01-01T00:00:00Z
const NOW_MS = 1_800_000_000_000;

class FakeClock {
  wallMs = NOW_MS;
  monoMs = 10_000;
  now() {
    return this.wallMs;
  }
  monotonic() {
    return this.monoMs;
  }
}

const terms = (changes = {}) => ({
  leaseId: '00ff',
  datacenter: 3,
  worker: 5,
  ttlMs: 3000,
  resumeAfterMs: NOW_MS - 1,
  validUntilMs: NOW_MS + 3000,
  renewEveryMs: 1000,
  serverNowMs: NOW_MS,
  layout: { timeBits: 41, datacenterBits: 5, workerBits: 5, sequenceBits: 12, epoch: '2024-01-01T00:00:00.000Z' },
  ...changes,
});

const client = new Client('http://127.0.0.1:9');
const generator = (clock, changes, sentMono = clock.monoMs, receivedMono = sentMono) =>
  new LeasedGenerator(client, terms(changes), sentMono, receivedMono, { clock });
const code = (g) => {
  try {
    g.nextId();
  } catch (error) {
    assert.ok(error instanceof IdgenError, String(error));
    return error.code;
  }
  assert.fail('an ID where a refusal was due');
};
const ms = (id) => Number(id >> 22n) + EPOCH_MS;

test('bits: time, datacenter, worker and sequence where the layout puts them', () => {
  const g = generator(new FakeClock());
  const first = g.nextId();
  assert.equal(first, (BigInt(NOW_MS - EPOCH_MS) << 22n) | (3n << 17n) | (5n << 12n));
  assert.equal(g.nextId(), first + 1n);
  assert.deepEqual(g.nextIds(3), [first + 2n, first + 3n, first + 4n]);
});

test('a non-default layout and epoch', () => {
  const clock = new FakeClock();
  const layout = { timeBits: 40, datacenterBits: 3, workerBits: 7, sequenceBits: 13, epoch: '2020-01-01T00:00:00Z' };
  const g = generator(clock, { layout, datacenter: 7, worker: 127 });
  const id = g.nextId();
  assert.equal(id, (BigInt(NOW_MS - 1_577_836_800_000) << 23n) | (7n << 20n) | (127n << 13n));
});

test('impossible terms are refused', () => {
  const clock = new FakeClock();
  const base = terms().layout;
  for (const layout of [
    { ...base, sequenceBits: 13 },
    { ...base, timeBits: 41.5 },
    { ...base, timeBits: 43, datacenterBits: -2 },
    { ...base, epoch: 'yesterday' },
    { ...base, epoch: '2024-01-01T00:00:00' }, // no offset: local time
  ]) {
    assert.throws(() => generator(clock, { layout }), IdgenError, JSON.stringify(layout));
  }
  assert.throws(() => generator(clock, { worker: 32 }), IdgenError);
  assert.throws(() => generator(clock, { validUntilMs: '1800000003000' }), IdgenError);
  assert.throws(() => generator(clock, { resumeAfterMs: -1 }), IdgenError);
});

test('not before the previous term ends, on the monotonic clock, nor below its mark on the wall clock', () => {
  const clock = new FakeClock();
  const g = generator(clock, { resumeAfterMs: NOW_MS + 50 });
  assert.equal(code(g), 'not-yet');
  clock.monoMs += 50;
  // Monotonic time has come, but the wall clock is behind the previous mark.
  assert.equal(code(g), 'clock-behind');
  clock.wallMs += 51;
  assert.equal(ms(g.nextId()), NOW_MS + 51);
});

test('the start counts from the answer, the deadline from the send', () => {
  const clock = new FakeClock();
  const sent = clock.monoMs;
  const received = sent + 40;
  const g = generator(clock, { resumeAfterMs: NOW_MS + 100 }, sent, received);
  clock.wallMs += 200; // the wall clock is out of the way
  clock.monoMs = received + 100 - 0.5;
  assert.equal(code(g), 'not-yet');
  clock.monoMs = received + 100;
  assert.equal(ms(g.nextId()), NOW_MS + 200);
  clock.monoMs = sent + 3000 - 0.5;
  g.nextId();
  clock.monoMs = sent + 3000;
  assert.equal(code(g), 'expired');
  assert.equal(g.state, 'expired');
});

test('a wall clock ahead meets the mark before the deadline', () => {
  const clock = new FakeClock();
  const g = generator(clock);
  clock.wallMs += 3000;
  assert.equal(code(g), 'expired');
  clock.wallMs -= 1;
  assert.equal(ms(g.nextId()), NOW_MS + 2999);
});

test('no ID dated past the layout end', () => {
  const clock = new FakeClock();
  const layout = { ...terms().layout, timeBits: 30, datacenterBits: 16 };
  const endMs = EPOCH_MS + 2 ** 30;
  clock.wallMs = endMs - 1;
  const g = generator(clock, { layout, resumeAfterMs: endMs - 2, validUntilMs: endMs + 5000, serverNowMs: endMs - 1 });
  assert.equal(Number(g.nextId() >> 33n) + EPOCH_MS, endMs - 1);
  clock.wallMs = endMs;
  assert.equal(code(g), 'expired');
});

test('a clock that steps back within the tolerance is ridden out, further back refused', () => {
  const clock = new FakeClock();
  const g = generator(clock);
  const first = g.nextId();
  clock.wallMs -= 10;
  assert.equal(g.nextId(), first + 1n);
  clock.wallMs -= 1;
  assert.equal(code(g), 'clock-behind');
  clock.wallMs += 12;
  assert.equal(ms(g.nextId()), NOW_MS + 1);
});

test('a used-up millisecond waits for the next', () => {
  const clock = new FakeClock();
  const g = generator(clock);
  const ids = g.nextIds(4096);
  assert.equal(ids.at(-1) & 4095n, 4095n);
  // The clock moves to the next millisecond after a few reads, and on every 100th after.
  let reads = 0;
  clock.now = () => NOW_MS + (reads++ < 4 ? 0 : Math.floor(reads / 100));
  const following = g.nextId();
  assert.equal(ms(following), NOW_MS + 1);
  assert.equal(following & 4095n, 0n);
  const more = g.nextIds(5000);
  assert.ok(more.every((id, i) => i === 0 || id > more[i - 1]));
  assert.ok(more[0] > following);
});
