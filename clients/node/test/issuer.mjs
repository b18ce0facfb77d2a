// A process issuing IDs on a leased number with the package, for cli/tests/clients.rs (the
// Python package's test/issuer.py speaks the same protocol):
//   node issuer.mjs <url> <token file> <out file> <plan>
// plan: N (issue N IDs, then close), until-signal (issue until SIGTERM or SIGINT, which the
// generator answers by releasing), until-stopped (issue until the generator stops: expired
// or lost; no close), until-stopped+K (then lease again and issue K more, then close).
// The lease is taken patiently: a 409 (every number held) is tried again every 100 ms for a
// minute. Every ID is appended to the out file as 8 little-endian bytes. Prints a JSON line
// each time it holds a number ({"leased": terms}) and each time a lease's issuing ends
// ({"ended": {count, stoppedBy, validUntilMs, renewals, failedRenewals, waits}}), and
// one whenever its count of renewals or failed renewals changes ({"renewed": {renewals,
// failedRenewals}}). A refusal to wait (not-yet, clock-behind) is counted and retried a
// millisecond later. The until-* plans are paced, 100 IDs and then a millisecond's sleep (a
// run of seconds stays megabytes); a count is issued as fast as the generator goes.
import { readFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { IdgenError, LeasedGenerator } from '../index.js';

const [url, tokenFile, outFile, plan] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
const out = openSync(outFile, 'w');
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

async function leasePatiently() {
  const giveUp = performance.now() + 60_000;
  for (;;) {
    try {
      return await LeasedGenerator.lease(url, { token, holder: `issuer pid ${process.pid}` });
    } catch (error) {
      if (!(error instanceof IdgenError) || error.status !== 409 || performance.now() > giveUp) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

const chunk = new BigUint64Array(65536);
let filled = 0;
const flush = () => {
  writeSync(out, new Uint8Array(chunk.buffer, 0, filled * 8));
  filled = 0;
};

/** Issues up to `count` IDs; resolves to how many and what stopped it. */
async function issue(generator, count, paced) {
  const batch = paced ? 100 : 4096;
  const waits = { 'not-yet': 0, 'clock-behind': 0 };
  let issued = 0;
  let stoppedBy = 'count';
  let waiting = false;
  let { renewals, failedRenewals } = generator;
  outer: while (issued < count) {
    for (let i = 0; i < batch && issued < count; i += 1) {
      let id;
      try {
        id = generator.nextId();
      } catch (error) {
        if (!(error.code in waits)) {
          stoppedBy = error.code;
          break outer;
        }
        waits[error.code] += 1;
        waiting = true;
        break;
      }
      chunk[filled++] = id;
      issued += 1;
      if (filled === chunk.length) flush();
    }
    if (generator.renewals !== renewals || generator.failedRenewals !== failedRenewals) {
      ({ renewals, failedRenewals } = generator);
      print({ renewed: { renewals, failedRenewals } });
    }
    // Let renewals (and signals) run; a refusal to wait is retried a millisecond later.
    await new Promise((resolve) => (waiting || paced ? setTimeout(resolve, 1) : setImmediate(resolve)));
    waiting = false;
  }
  flush();
  const { validUntilMs } = generator.terms;
  print({
    ended: {
      count: issued,
      stoppedBy,
      validUntilMs,
      renewals: generator.renewals,
      failedRenewals: generator.failedRenewals,
      waits,
    },
  });
  return stoppedBy;
}

const [, stopThenMore] = /^until-stopped\+([0-9]+)$/.exec(plan) ?? [];
let generator = await leasePatiently();
print({ leased: generator.terms });
if (plan === 'until-signal') {
  await issue(generator, Infinity, true);
} else if (plan === 'until-stopped' || stopThenMore !== undefined) {
  await issue(generator, Infinity, true);
  if (stopThenMore !== undefined) {
    // Given back, or it would go on renewing (a renewal the service still honours makes a
    // generator valid again) and hold the number against the new lease.
    await generator.close();
    generator = await leasePatiently();
    print({ leased: generator.terms });
    if ((await issue(generator, Number(stopThenMore), false)) === 'count') await generator.close();
  }
} else if (/^[0-9]+$/.test(plan)) {
  if ((await issue(generator, Number(plan), false)) === 'count') await generator.close();
} else {
  throw new Error(`unknown plan ${plan}`);
}
closeSync(out);
