// A process issuing IDs on a leased number with the package, for cli/tests/clients.rs:
//   node issuer.mjs <url> <token file> <count | "until-signal"> <out file>
// Writes every ID as 8 little-endian bytes to the out file, a JSON line when it holds its
// number ({"leased": …}) and one when it ends ({"count": …, "stoppedBy": …}).
import { readFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { LeasedGenerator } from '../index.js';

const [url, tokenFile, countText, outFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
const forever = countText === 'until-signal';
const count = forever ? Infinity : Number(countText);
const out = openSync(outFile, 'w');
const generator = await LeasedGenerator.lease(url, { token, holder: `issuer pid ${process.pid}` });
console.log(JSON.stringify({ leased: generator.terms }));

const chunk = new BigUint64Array(65536);
let filled = 0;
let issued = 0;
let stoppedBy = 'count';
const flush = () => {
  writeSync(out, new Uint8Array(chunk.buffer, 0, filled * 8));
  filled = 0;
};
outer: while (issued < count) {
  for (let i = 0; i < 4096 && issued < count; i += 1) {
    let id;
    try {
      id = generator.nextId();
    } catch (error) {
      if (error.code === 'not-yet' || error.code === 'clock-behind') continue;
      stoppedBy = error.code;
      break outer;
    }
    chunk[filled++] = id;
    issued += 1;
    if (filled === chunk.length) flush();
  }
  // Let renewals (and signals) run.
  await new Promise((resolve) => setImmediate(resolve));
}
flush();
closeSync(out);
if (stoppedBy === 'count') await generator.close();
console.log(JSON.stringify({ count: issued, stoppedBy, renewals: generator.renewals }));
