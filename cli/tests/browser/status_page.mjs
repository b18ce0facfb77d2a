// Drives Debian's chromium through the status page of a live `idgen serve`, for
// cli/tests/status_page.rs, which checks what this prints (one JSON object on stdout): what
// the page showed, what the browser reported, and where the screenshots are.
//
//   node status_page.mjs BASE_URL TOKEN HOSTILE_WORKER SCREENSHOT_DIR
//
// Every wait is for what the page shows (bounded), never a fixed sleep.
import puppeteer from "puppeteer-core";

const [base, token, hostileWorker, screenshots] = process.argv.slice(2);
// Within the 60 s the Rust test gives the whole run: a step that has not ended by then
// is named, and the browser closed.
const PATIENCE_MS = 20_000;
const WHOLE_RUN_MS = 50_000;
const CHROMIUM = process.env.IDGEN_CHROMIUM ?? "/usr/bin/chromium";

const seen = { problems: [] };
let step = "starting chromium";
const said = (name) => {
  step = name;
  console.error(`step: ${name}`);
};
let browser = null;
setTimeout(() => {
  console.error(`the browser run did not end within ${WHOLE_RUN_MS} ms; stuck at: ${step}`);
  // Not a polite close, which may itself wait: the browser is killed, then this process.
  browser?.process()?.kill("SIGKILL");
  process.exit(1);
}, WHOLE_RUN_MS).unref();
browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  // As root (the test command's machine), chromium runs only without its sandbox.
  args: ["--no-sandbox", "--headless=new", "--disable-gpu"],
  timeout: PATIENCE_MS,
  protocolTimeout: PATIENCE_MS * 2,
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(PATIENCE_MS);
  await page.setViewport({ width: 1200, height: 900 });
  // Anything the page logs as an error, a script error, and every request it makes (no
  // asset may come from anywhere but the service).
  page.on("console", (message) => {
    if (message.type() === "error") seen.problems.push(`console: ${message.text()} (${message.location().url ?? ""})`);
  });
  page.on("pageerror", (error) => seen.problems.push(`page error: ${error.message}`));
  const requested = new Set();
  page.on("request", (request) => requested.add(new URL(request.url()).origin));

  said("loading the page");
  const response = await page.goto(`${base}/`, { waitUntil: "load" });
  seen.status = response.status();
  seen.csp = response.headers()["content-security-policy"] ?? null;
  seen.titleBefore = await page.title();

  const text = (selector) => page.$eval(selector, (element) => element.textContent);
  const holderCell = `#fleet tr[data-worker="${hostileWorker}"] td.holder`;
  // Loaded: the lease and the fleet (the hostile holder's number among it) are shown.
  await page.waitForFunction(
    (cell) => document.getElementById("lease-state").textContent !== "…" && document.querySelector(cell) !== null,
    {},
    holderCell,
  );
  seen.lease = await text("#lease-state");
  seen.worker = await text("#worker");
  seen.datacenter = await text("#datacenter");
  seen.timeLeft = await text("#time-left");
  seen.outage = await text("#outage");
  seen.identity = await text("#identity");
  seen.holderWithoutToken = await text(holderCell);
  seen.pageTextWithoutToken = await page.evaluate(() => document.body.innerText);

  // IDs of each kind, issued while the page is open: its totals and rates follow without
  // a reload.
  const issue = async (kind, count) => {
    const reply = await fetch(`${base}/v1/ids`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ count, kind }),
    });
    if (!reply.ok) throw new Error(`POST /v1/ids ${kind}: ${reply.status} ${await reply.text()}`);
    return (await reply.json()).ids;
  };
  said("issuing IDs while the page is open");
  await issue("uuidv7", 40);
  await issue("ulid", 7);
  // Snowflake IDs last, in one request: the first poll that shows them counts them all
  // since the poll before, so its rate is not zero.
  const snowflakes = await issue("snowflake", 300);
  said("waiting for the page to show them");
  // Totals and rates read in the poll that first shows the new totals, not one later.
  const shown = await page.waitForFunction(() => {
    const read = (id) => document.getElementById(id).textContent;
    if (read("total-snowflake") !== "300" || read("total-uuidv7") !== "40" || read("total-ulid") !== "7") {
      return false;
    }
    const kinds = ["snowflake", "uuidv7", "ulid"];
    return {
      totals: Object.fromEntries(kinds.map((kind) => [kind, read(`total-${kind}`)])),
      rates: Object.fromEntries(kinds.map((kind) => [kind, read(`rate-${kind}`)])),
    };
  }, { polling: "mutation" });
  Object.assign(seen, await shown.jsonValue());

  said("decoding through the box");
  // The decode box: an ID just issued, then text that is no ID.
  seen.decodedId = snowflakes[0];
  await page.type("#decode-input", snowflakes[0]);
  await page.click("#decode-form button");
  await page.waitForSelector("#decoded-worker");
  seen.decoded = await page.$$eval("#decode-result dd", (values) =>
    Object.fromEntries(values.map((value) => [value.id.replace("decoded-", ""), value.textContent])),
  );
  await page.$eval("#decode-input", (input) => {
    input.value = "";
  });
  await page.type("#decode-input", "<b>not an id</b>");
  await page.click("#decode-form button");
  await page.waitForFunction(() => document.getElementById("decode-error").textContent !== "");
  seen.decodeError = await text("#decode-error");
  seen.decodeResultAfterError = await page.$$eval("#decode-result dd", (values) => values.length);

  said("giving the token");
  // The token shows holder names: the hostile one as its characters, running nothing.
  await page.type("#token-input", token);
  await page.click("#token-form button");
  await page.waitForFunction((cell) => document.querySelector(cell).textContent !== "hidden", {}, holderCell);
  seen.holderWithToken = await text(holderCell);
  seen.imgElements = await page.evaluate(() => document.querySelectorAll("img").length);
  seen.pwned = await page.evaluate(() => window.pwned ?? null);
  seen.titleAfter = await page.title();
  await page.screenshot({ path: `${screenshots}/status-desktop.png`, fullPage: true });

  said("a phone's width");
  // A phone: nothing scrolls sideways, the long names included. (The same page, resized:
  // making it a mobile one would reload it, and forget the token.)
  await page.setViewport({ width: 390, height: 844 });
  await page.waitForFunction(() => window.innerWidth === 390);
  seen.phone = await page.evaluate((cell) => ({
    holder: document.querySelector(cell).textContent,
    innerWidth: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    bodyScrollWidth: document.body.scrollWidth,
  }), holderCell);
  await page.screenshot({ path: `${screenshots}/status-phone.png`, fullPage: true });
  seen.origins = [...requested];
  seen.screenshots = [`${screenshots}/status-desktop.png`, `${screenshots}/status-phone.png`];
} finally {
  said("closing the browser");
  await browser.close();
}
console.log(JSON.stringify(seen));
