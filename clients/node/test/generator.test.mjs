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

test('a wall clock that stops while a millisecond is used up ends at the deadline, not in a hang', { timeout: 10_000 }, () => {
  const clock = new FakeClock();
  const g = generator(clock);
  g.nextIds(4096);
  // The wall clock stands still (a generator that spins on it without looking at its
  // deadline fails here rather than hang); the monotonic one moves a millisecond a read.
  let reads = 0;
  clock.now = () => {
    if ((reads += 1) > 1_000_000) throw new Error('spinning on a clock that stopped');
    return NOW_MS;
  };
  clock.monotonic = () => (clock.monoMs += 1);
  assert.equal(code(g), 'expired');
});

test('a wall clock that steps back past the tolerance while a millisecond is used up refuses', { timeout: 10_000 }, () => {
  const clock = new FakeClock();
  const g = generator(clock);
  g.nextIds(4096);
  let reads = 0;
  clock.now = () => NOW_MS - (reads++ < 3 ? 0 : 11);
  assert.equal(code(g), 'clock-behind');
});

test('a wall clock before the epoch refuses, it does not make negative IDs', () => {
  const clock = new FakeClock();
  clock.wallMs = EPOCH_MS - 5_000;
  const g = generator(clock, { resumeAfterMs: 0, serverNowMs: NOW_MS });
  assert.equal(code(g), 'clock-behind');
});

test('a renewal period out of range is refused', () => {
  const clock = new FakeClock();
  for (const renewEveryMs of [0, 2 ** 31, 1.5]) {
    assert.throws(() => generator(clock, { renewEveryMs }), IdgenError, String(renewEveryMs));
  }
});

/**
 * A stand-in for the service on 127.0.0.1: `routes[method + ' ' + path]` (the lease ID
 * replaced by `:id`) answers each request, as `(request, response, body)`.
 */
async function stub(routes) {
  const { createServer } = await import('node:http');
  const seen = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      const route = `${request.method} ${request.url.replace(/[0-9a-f]{32}/, ':id')}`;
      seen.push(route);
      const answer = routes[route];
      if (answer === undefined) {
        response.writeHead(404).end('{"error":"no such route"}');
      } else {
        answer(request, response, body);
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, seen, server };
}

const LEASE_ID = '0123456789abcdef0123456789abcdef';
const leaseAnswer = (changes = {}) => (request, response) => {
  const now = Date.now();
  const body = terms({
    leaseId: LEASE_ID,
    resumeAfterMs: now - 1,
    validUntilMs: now + 3000,
    serverNowMs: now,
    renewEveryMs: 20,
    ...changes,
  });
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

/** Waits (at most 10 s) until `done()`. */
async function until(what, done) {
  const give = performance.now() + 10_000;
  while (!done()) {
    assert.ok(performance.now() < give, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('a renewal answer for another lease is a failed renewal', async () => {
  const service = await stub({
    'POST /v1/generators/lease': leaseAnswer(),
    'POST /v1/generators/:id/renew': leaseAnswer({ leaseId: 'ffffffffffffffffffffffffffffffff', validUntilMs: Date.now() + 60_000 }),
    'DELETE /v1/generators/:id': (request, response) => response.writeHead(204).end(),
  });
  const g = await LeasedGenerator.lease(service.url, { token: 't', handleSignals: false });
  const mark = g.terms.validUntilMs;
  await until('a failed renewal', () => g.failedRenewals >= 2);
  assert.equal(g.renewals, 0);
  assert.equal(g.terms.validUntilMs, mark);
  await g.close();
  service.server.close();
});

test('a 410 whose body is cut short stops the generator and crashes nothing', async () => {
  const unhandled = [];
  const record = (error) => unhandled.push(error);
  process.on('unhandledRejection', record);
  const service = await stub({
    'POST /v1/generators/lease': leaseAnswer(),
    'POST /v1/generators/:id/renew': (request, response) => {
      response.writeHead(410, { 'content-type': 'application/json', 'content-length': '100' });
      response.write('{"error":');
      setTimeout(() => response.socket.destroy(), 5);
    },
  });
  const g = await LeasedGenerator.lease(service.url, { token: 't', handleSignals: false });
  await until('the loss', () => g.state === 'lost');
  assert.equal(code(g), 'lost');
  // Time for a rejection of the cut body to surface, were there one.
  await until('the cut body read', () => service.seen.length >= 2);
  await new Promise((resolve) => setImmediate(resolve));
  process.off('unhandledRejection', record);
  assert.deepEqual(unhandled, []);
  service.server.closeAllConnections();
  service.server.close();
});

test('SIGTERM releases at once, gives up on a silent service within a second, and leaves a program that listens alive', async () => {
  let released;
  const service = await stub({
    'POST /v1/generators/lease': leaseAnswer({ renewEveryMs: 60_000 }),
    // The release is never answered.
    'DELETE /v1/generators/:id': (request) => {
      const at = performance.now();
      request.socket.on('close', () => (released = performance.now() - at));
    },
  });
  const g = await LeasedGenerator.lease(service.url, { token: 't' });
  let heard = 0;
  const listener = () => (heard += 1);
  process.on('SIGTERM', listener);
  process.kill(process.pid, 'SIGTERM');
  await until('the release given up', () => released !== undefined);
  assert.ok(released < 3_000, `the release took ${released} ms`);
  assert.equal(heard, 1);
  assert.equal(g.state, 'closed');
  process.off('SIGTERM', listener);
  service.server.closeAllConnections();
  service.server.close();
});

test('SIGTERM with several generators: every number is given back before the process ends by the signal', { timeout: 30_000 }, async () => {
  const { spawn } = await import('node:child_process');
  // Four generators in a child process: 0 and 2 valid at the signal, 1 closed before it, 3
  // closing (its release held by the service) when it comes. The service answers the
  // releases at different times, 2's at once: a process that ends at the first answer cuts
  // the others off.
  const delayMs = [200, 0, 0, 300];
  let leases = 0;
  const released = new Map();
  const answered = [];
  const service = await stub({
    'POST /v1/generators/lease': (request, response) => {
      const index = leases++;
      leaseAnswer({ leaseId: String(index).repeat(32), worker: index, renewEveryMs: 60_000 })(request, response);
    },
    'DELETE /v1/generators/:id': (request, response, body) => {
      const index = Number(request.url.at(-1));
      released.set(index, JSON.parse(body));
      setTimeout(() => {
        answered.push(index);
        response.writeHead(204).end();
      }, delayMs[index]);
    },
  });
  const program = `
    import { LeasedGenerator } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    const generators = [];
    for (let i = 0; i < 4; i += 1) generators.push(await LeasedGenerator.lease(process.argv[1], { token: 't' }));
    await generators[1].close();
    generators[3].close().catch(() => {});
    setInterval(() => {}, 60_000); // alive until a signal ends it
    process.stdout.write('leased\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', program, service.url], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let errors = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (errors += chunk));
  let ended;
  child.on('exit', (code, signal) => (ended = { code, signal, answered: [...answered] }));
  try {
    await until('the child to hold its numbers', () => ended !== undefined || (output === 'leased\n' && released.has(3)));
    assert.equal(ended, undefined, `the child ended early: ${errors}`);
    child.kill('SIGTERM');
    await until('the child to end', () => ended !== undefined);
  } finally {
    if (ended === undefined) child.kill('SIGKILL');
    service.server.closeAllConnections();
    service.server.close();
  }
  assert.equal(ended.signal, 'SIGTERM', `the child ended with code ${ended.code}: ${errors}`);
  assert.deepEqual([...released.keys()].sort((a, b) => a - b), [0, 1, 2, 3]);
  for (const [index, body] of released) assert.ok(Number.isSafeInteger(body.lastUsedMs), `release ${index}: ${JSON.stringify(body)}`);
  assert.deepEqual(ended.answered.sort((a, b) => a - b), [0, 1, 2, 3], 'the releases answered before the child ended');
});
