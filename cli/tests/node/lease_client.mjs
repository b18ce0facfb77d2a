// A generator in another language on a leased worker number: it leases a number from
// `idgen serve`'s lease API, builds Snowflake IDs itself with BigInt (the layout the lease
// names: 41 time bits, 5 datacenter, 5 worker, 12 sequence, epoch 2024-01-01), renews every
// renewEveryMs, and issues only IDs dated after resumeAfterMs and before validUntilMs. When
// renewals fail it keeps the terms it has and stops at validUntilMs; on 410 it stops at once.
//
// Run by cli/tests/lease_api.rs:
//   node lease_client.mjs <base URL> <token file> <run ms> <ID file>
// Writes every ID (decimal, one a line) to the ID file and a JSON summary to stdout.
import { readFileSync, writeFileSync } from 'node:fs';

const [base, tokenFile, runMsText, idFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
const runMs = Number(runMsText);

const leased = await fetch(`${base}/v1/generators/lease`, {
  method: 'POST',
  headers,
  body: JSON.stringify({ holder: 'node-lease-client' }),
});
if (leased.status !== 200) {
  console.error(`lease: ${leased.status} ${await leased.text()}`);
  process.exit(1);
}
const terms = await leased.json();
const { layout } = terms;
const [timeBits, dcBits, workerBits, seqBits] = [
  layout.timeBits, layout.datacenterBits, layout.workerBits, layout.sequenceBits,
];
if (timeBits + dcBits + workerBits + seqBits !== 63) throw new Error('bad layout');
const epoch = Date.parse(layout.epoch);
const maxSeq = (1 << seqBits) - 1;
const node =
  (BigInt(terms.datacenter) << BigInt(workerBits + seqBits)) |
  (BigInt(terms.worker) << BigInt(seqBits));
const timeShift = BigInt(dcBits + workerBits + seqBits);

let validUntilMs = terms.validUntilMs;
let lost = false;
let renewals = 0;
let failedRenewals = 0;

// Renewals run beside the generating loop, which yields to them between batches.
let renewing = true;
const renewLoop = (async () => {
  while (renewing && !lost) {
    await new Promise((resolve) => setTimeout(resolve, terms.renewEveryMs));
    if (!renewing) break;
    try {
      const response = await fetch(`${base}/v1/generators/${terms.leaseId}/renew`, {
        method: 'POST',
        headers,
      });
      if (response.status === 200) {
        validUntilMs = (await response.json()).validUntilMs;
        renewals += 1;
      } else if (response.status === 410) {
        lost = true;
      } else {
        failedRenewals += 1; // keep the terms we have
      }
    } catch {
      failedRenewals += 1; // the service is gone: keep the terms we have
    }
  }
})();

const ids = [];
let lastMs = terms.resumeAfterMs; // only IDs dated after the previous holder's mark
let sequence = maxSeq; // so the first ID takes a new millisecond
let stoppedBy = 'time';
const started = Date.now();
outer: for (;;) {
  for (let i = 0; i < 500; i++) {
    if (lost) { stoppedBy = 'lost'; break outer; }
    if (Date.now() - started >= runMs) { stoppedBy = 'time'; break outer; }
    let now = Date.now();
    if (now > lastMs) {
      lastMs = now;
      sequence = 0;
    } else if (sequence < maxSeq) {
      sequence += 1;
    } else {
      // This millisecond (or the mark) is used up: wait for the clock.
      while (Date.now() <= lastMs) {}
      lastMs = Date.now();
      sequence = 0;
    }
    if (lastMs >= validUntilMs) { stoppedBy = 'validUntil'; break outer; }
    ids.push(((BigInt(lastMs - epoch) << timeShift) | node | BigInt(sequence)).toString());
  }
  await new Promise((resolve) => setImmediate(resolve));
}
renewing = false;
writeFileSync(idFile, ids.join('\n') + '\n');
console.log(JSON.stringify({
  count: ids.length,
  datacenter: terms.datacenter,
  worker: terms.worker,
  resumeAfterMs: terms.resumeAfterMs,
  validUntilMs,
  stoppedBy,
  renewals,
  failedRenewals,
}));
process.exit(0);
