// idgen for Node.js 18 and later, no dependency: IDs from an `idgen serve` over HTTP
// (`Client`), and Snowflake IDs made in this process on a worker number leased through the
// service's lease API (`LeasedGenerator`), which stops before the lease could pass on.
//
// Clock rules of the leased generator (the same as the crate's, see README.md):
// - Deadlines are kept on the monotonic clock (`performance.now()`). The service read its
//   clock (`serverNowMs`) between the send of the request it answered and the answer's
//   arrival, so each bound takes the side of that span that cannot be late: the send time
//   plus (`validUntilMs` - `serverNowMs`) for the end of the term, the arrival plus
//   (`resumeAfterMs` - `serverNowMs`) for its start. A wall clock that is stepped or skewed
//   moves neither.
// - The wall clock (`Date.now()`) only dates IDs. IDs are dated after `resumeAfterMs` (the
//   previous holder's mark) and before `validUntilMs` (this holder's own mark): a clock
//   behind the previous mark by more than the tolerance refuses; a clock ahead reaches the
//   mark sooner and stops sooner.
// - A clock that steps back by up to `clockBackToleranceMs` (10) is ridden out on the last
//   millisecond's sequence; further back, calls refuse until it has caught up.

import { performance } from 'node:perf_hooks';

/**
 * The clocks of the system: `now()` the wall clock in Unix ms (it dates IDs), `monotonic()`
 * a clock in ms that never steps (it keeps deadlines). A generator takes any object with
 * both (`clock` option): tests pass a fake one.
 */
export const systemClock = Object.freeze({
  now: () => Date.now(),
  monotonic: () => performance.now(),
});

/** Any refusal of the service or of the generator. */
export class IdgenError extends Error {
  constructor(message, { status, code } = {}) {
    super(message);
    this.name = 'IdgenError';
    /** The HTTP status, for an answer of the service. */
    this.status = status;
    /** What kind of refusal: `http`, `expired`, `lost`, `not-yet`, `clock-behind`, `closed`. */
    this.code = code ?? 'http';
  }
}

const KINDS = new Set(['snowflake', 'uuidv7', 'ulid']);

/** Parses `Retry-After` (whole seconds) into milliseconds, or undefined. */
function retryAfterMs(response) {
  const value = response.headers.get('retry-after');
  if (value === null || !/^[0-9]{1,6}$/.test(value)) return undefined;
  return Number(value) * 1000;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The release made on SIGTERM or SIGINT: tried once, for at most a second. */
const SIGNAL_RELEASE = Object.freeze({ retries: 0, timeoutMs: 1000 });

/**
 * The terms of a renewal's 200, or undefined when its body is not terms of the lease `held`
 * (a proxy's page, a cut connection, another lease's answer): such a renewal counts as
 * failed, the terms held are kept.
 */
async function renewedTerms(response, held) {
  try {
    const terms = await response.json();
    const ms = [terms?.validUntilMs, terms?.serverNowMs];
    const same = ['leaseId', 'worker', 'datacenter'].every((name) => !(name in terms) || terms[name] === held[name]);
    return ms.every(Number.isSafeInteger) && same ? terms : undefined;
  } catch {
    return undefined;
  }
}

/** An `idgen serve` over HTTP. */
export class Client {
  #base;
  #headers;
  #retries;
  #backoffMs;
  #maxWaitMs;
  #timeoutMs;

  /**
   * @param {string} url the service, as `http://host:port`
   * @param {{token?: string, retries?: number, backoffMs?: number, maxWaitMs?: number, timeoutMs?: number}} [options]
   *   `token`: the lease API's bearer token (only the lease API needs it); `retries`: how
   *   many times a 503 or a failed connection is tried again (default 4); `backoffMs`: the
   *   first wait, doubled each time (default 100); `maxWaitMs`: the longest single wait,
   *   `Retry-After` included (default 5000); `timeoutMs`: how long one attempt may take
   *   (default 10000).
   */
  constructor(url, { token, retries = 4, backoffMs = 100, maxWaitMs = 5000, timeoutMs = 10000 } = {}) {
    const base = new URL(url);
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`idgen: ${url} is not an http(s) URL`);
    }
    this.#base = base.href.replace(/\/+$/, '');
    this.#headers = { accept: 'application/json' };
    if (token !== undefined) this.#headers.authorization = `Bearer ${String(token).trim()}`;
    this.#retries = retries;
    this.#backoffMs = backoffMs;
    this.#maxWaitMs = maxWaitMs;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * A request, tried again on 503 (waiting `Retry-After` when given) and on a failed
   * connection or one that took longer than `timeoutMs`, at most `retries` more times.
   * Resolves to the response of any other status.
   * @returns {Promise<Response>}
   */
  async request(method, path, body, options) {
    return (await this.timedRequest(method, path, body, options)).response;
  }

  /**
   * `request`, and when (on `monotonic`, by default the system's) the attempt answered was
   * sent and its answer came: the service read its clock between the two.
   * @returns {Promise<{response: Response, sentMono: number, receivedMono: number}>}
   */
  async timedRequest(
    method,
    path,
    body,
    { retries = this.#retries, timeoutMs = this.#timeoutMs, monotonic = systemClock.monotonic } = {},
  ) {
    const init = { method, headers: { ...this.#headers } };
    if (body !== undefined) {
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let wait = this.#backoffMs;
    for (let attempt = 0; ; attempt += 1) {
      let response;
      const sentMono = monotonic();
      try {
        response = await fetch(`${this.#base}${path}`, { ...init, signal: AbortSignal.timeout(timeoutMs) });
      } catch (error) {
        if (attempt >= retries) throw new IdgenError(`idgen: ${method} ${path}: ${error.message}`);
      }
      if (response !== undefined && (response.status !== 503 || attempt >= retries)) {
        return { response, sentMono, receivedMono: monotonic() };
      }
      const asked = response === undefined ? undefined : retryAfterMs(response);
      if (response !== undefined) await response.arrayBuffer();
      await sleep(Math.min(asked ?? wait, this.#maxWaitMs));
      wait *= 2;
    }
  }

  /** The JSON answer of a request, or an IdgenError with the service's reason. */
  async #json(method, path, body) {
    const response = await this.request(method, path, body);
    const text = await response.text();
    let parsed;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const reason = parsed?.error ?? text;
      throw new IdgenError(`idgen: ${method} ${path}: ${response.status} ${reason}`, {
        status: response.status,
      });
    }
    return parsed;
  }

  /**
   * `count` IDs of `kind`, increasing: Snowflake IDs as `bigint`, UUIDv7s and ULIDs as
   * strings.
   * @returns {Promise<bigint[] | string[]>}
   */
  async ids(count, kind = 'snowflake') {
    if (!Number.isSafeInteger(count) || count < 1) {
      throw new RangeError(`idgen: count must be a whole number from 1; got ${count}`);
    }
    if (!KINDS.has(kind)) throw new RangeError(`idgen: kind must be snowflake, uuidv7 or ulid; got ${kind}`);
    const { ids } = await this.#json('POST', '/v1/ids', { count, kind });
    return kind === 'snowflake' ? ids.map((id) => BigInt(id)) : ids;
  }

  /** What an ID says: kind, creation time and, for a Snowflake ID, its node and sequence. */
  async decode(id) {
    return this.#json('GET', `/v1/ids/${encodeURIComponent(String(id))}/decode`);
  }

  /** The layout the service's Snowflake IDs follow. */
  async layout() {
    return this.#json('GET', '/v1/layout');
  }
}

/** Snowflake IDs made in this process on a worker number the service leases to it. */
export class LeasedGenerator {
  #client;
  #terms;
  #epochMs;
  #endMs;
  #clock;
  #timeShift;
  #node;
  #maxSequence;
  #toleranceMs;
  // The term: monotonic instants, and this holder's own mark as a date.
  #resumeMono;
  #deadlineMono;
  #markMs;
  // The last ID: its millisecond (its date) and sequence; its time field as a bigint.
  #lastMs;
  #sequence;
  #base;
  #state = 'valid';
  #timer;
  // The release under way or done, once the generator is closed.
  #releasing;
  /** Renewals confirmed, and failed (the terms kept). */
  renewals = 0;
  failedRenewals = 0;

  /**
   * A generator on `terms` the service gave to a lease request sent at `sentMono` and
   * answered at `receivedMono` (on `clock.monotonic()`). `LeasedGenerator.lease` makes one
   * and starts renewing it.
   */
  constructor(client, terms, sentMono, receivedMono, { clockBackToleranceMs = 10, clock = systemClock } = {}) {
    const layout = terms?.layout ?? {};
    const widths = [layout.timeBits, layout.datacenterBits, layout.workerBits, layout.sequenceBits];
    if (widths.some((bits) => !Number.isInteger(bits) || bits < 0) || widths.reduce((a, b) => a + b) !== 63) {
      throw new IdgenError(`idgen: the lease names an impossible layout ${JSON.stringify(layout)}`);
    }
    for (const name of ['datacenter', 'worker', 'resumeAfterMs', 'validUntilMs', 'serverNowMs', 'renewEveryMs']) {
      if (!Number.isSafeInteger(terms[name]) || terms[name] < 0) {
        throw new IdgenError(`idgen: the lease's ${name} is not a whole number: ${JSON.stringify(terms[name])}`);
      }
    }
    if (terms.renewEveryMs < 1 || terms.renewEveryMs >= 2 ** 31) {
      throw new IdgenError(`idgen: the lease's renewEveryMs ${terms.renewEveryMs} is out of range`);
    }
    if (terms.datacenter >= 2 ** layout.datacenterBits || terms.worker >= 2 ** layout.workerBits) {
      throw new IdgenError(`idgen: the lease's node ${terms.datacenter}/${terms.worker} does not fit its layout`);
    }
    if (!Number.isInteger(clockBackToleranceMs) || clockBackToleranceMs < 0) {
      throw new RangeError(`idgen: clockBackToleranceMs must be a whole number from 0; got ${clockBackToleranceMs}`);
    }
    if (typeof clock?.now !== 'function' || typeof clock?.monotonic !== 'function') {
      throw new TypeError('idgen: clock must have now() and monotonic()');
    }
    this.#clock = clock;
    this.#client = client;
    this.#terms = terms;
    // RFC 3339 with an offset (the service writes `Z`): a date without one would be read
    // in local time.
    this.#epochMs = /(Z|[+-][0-9]{2}:[0-9]{2})$/i.test(layout.epoch ?? '') ? Date.parse(layout.epoch) : NaN;
    if (!Number.isSafeInteger(this.#epochMs)) throw new IdgenError(`idgen: bad epoch ${layout.epoch}`);
    // The first millisecond past the layout's last: no ID is dated there.
    this.#endMs = this.#epochMs + 2 ** layout.timeBits;
    const sequenceBits = layout.sequenceBits;
    this.#timeShift = BigInt(layout.datacenterBits + layout.workerBits + sequenceBits);
    this.#node =
      (BigInt(terms.datacenter) << BigInt(layout.workerBits + sequenceBits)) |
      (BigInt(terms.worker) << BigInt(sequenceBits));
    this.#maxSequence = 2 ** sequenceBits - 1;
    this.#toleranceMs = clockBackToleranceMs;
    this.#resumeMono = receivedMono + (terms.resumeAfterMs - terms.serverNowMs);
    this.#deadlineMono = sentMono + (terms.validUntilMs - terms.serverNowMs);
    this.#markMs = Math.min(terms.validUntilMs, this.#endMs);
    // The first ID is dated after the previous holder's mark.
    this.#lastMs = terms.resumeAfterMs;
    this.#sequence = this.#maxSequence;
    this.#base = this.#timeField(this.#lastMs);
  }

  /**
   * Leases a worker number from the service at `url` and starts renewing it.
   * @param {string} url
   * @param {{token: string, holder?: string, handleSignals?: boolean, clockBackToleranceMs?: number, clock?: {now(): number, monotonic(): number}}} options
   *   `holder`: a name for operators (default `node pid N`); `handleSignals`: release the
   *   number on SIGTERM and SIGINT, then end as the signal would once every generator's
   *   release has ended (default true); `clock`: the clocks it reads (default `systemClock`).
   */
  static async lease(
    url,
    { token, holder, handleSignals = true, clockBackToleranceMs = 10, clock = systemClock, ...rest } = {},
  ) {
    const client = new Client(url, { token, ...rest });
    const { response, sentMono, receivedMono } = await client.timedRequest(
      'POST',
      '/v1/generators/lease',
      { holder: holder ?? `node pid ${process.pid}` },
      { monotonic: () => clock.monotonic() },
    );
    const text = await response.text();
    if (response.status !== 200) {
      let reason = text;
      try {
        reason = JSON.parse(text).error ?? text;
      } catch {}
      throw new IdgenError(`idgen: lease: ${response.status} ${reason}`, { status: response.status });
    }
    let generator;
    try {
      generator = new LeasedGenerator(client, JSON.parse(text), sentMono, receivedMono, { clockBackToleranceMs, clock });
    } catch (error) {
      // Unusable terms: give the number back (with the last mark written) if it can be named.
      const leaseId = /"leaseId"\s*:\s*"([0-9a-f]{1,64})"/.exec(text)?.[1];
      if (leaseId !== undefined) {
        await client.request('DELETE', `/v1/generators/${leaseId}`).then((r) => r.arrayBuffer(), () => {});
      }
      throw error instanceof IdgenError ? error : new IdgenError(`idgen: lease: the answer is not terms: ${error.message}`);
    }
    generator.#scheduleRenewal();
    if (handleSignals) generator.#handleSignals();
    return generator;
  }

  /** The terms the service gave (and the latest `validUntilMs`). */
  get terms() {
    return { ...this.#terms, validUntilMs: this.#markMs };
  }

  get worker() {
    return this.#terms.worker;
  }

  get datacenter() {
    return this.#terms.datacenter;
  }

  /** `valid`, `lost` (the service said so: 410), `closed`, or `expired` (past the deadline). */
  get state() {
    if (this.#state === 'valid' && this.#clock.monotonic() >= this.#deadlineMono) return 'expired';
    return this.#state;
  }

  #timeField(ms) {
    return (BigInt(ms - this.#epochMs) << this.#timeShift) | this.#node;
  }

  /**
   * The next ID, above every one this generator made. Throws an IdgenError (code
   * `expired`, `lost`, `closed`, `not-yet` or `clock-behind`) instead of an ID it cannot
   * vouch for.
   * @returns {bigint}
   */
  nextId() {
    if (this.#state !== 'valid') {
      throw new IdgenError(`idgen: the lease is ${this.#state}`, { code: this.#state });
    }
    const mono = this.#clock.monotonic();
    if (mono >= this.#deadlineMono) {
      throw new IdgenError('idgen: the lease ran out: no renewal reached the service in time', {
        code: 'expired',
      });
    }
    if (mono < this.#resumeMono) {
      throw new IdgenError(
        `idgen: the previous holder's term ends in ${Math.ceil(this.#resumeMono - mono)} ms`,
        { code: 'not-yet' },
      );
    }
    let now = this.#clock.now();
    if (now <= this.#lastMs) {
      if (this.#lastMs - now > this.#toleranceMs) throw this.#behind(now);
      if (this.#sequence < this.#maxSequence) {
        this.#sequence += 1;
        return this.#base | BigInt(this.#sequence);
      }
      now = this.#nextMillisecond();
    }
    if (now >= this.#markMs) return this.#pastMark();
    if (now < this.#epochMs) throw this.#behind(now);
    this.#lastMs = now;
    this.#sequence = 0;
    this.#base = this.#timeField(now);
    return this.#base;
  }

  /**
   * The wall clock once it has passed the last ID's millisecond, whose sequence is used up:
   * at most the tolerance and a millisecond away, unless the clock steps back further or
   * stops, which throw, as does the deadline passing meanwhile.
   */
  #nextMillisecond() {
    for (;;) {
      const now = this.#clock.now();
      if (now > this.#lastMs) return now;
      if (this.#lastMs - now > this.#toleranceMs) throw this.#behind(now);
      if (this.#clock.monotonic() >= this.#deadlineMono) {
        throw new IdgenError('idgen: the lease ran out while waiting for the next millisecond', {
          code: 'expired',
        });
      }
    }
  }

  #behind(now) {
    return new IdgenError(
      now < this.#epochMs
        ? `idgen: the clock (${now}) is before the layout's epoch`
        : `idgen: the clock is ${this.#lastMs - now} ms behind the last ID's millisecond`,
      { code: 'clock-behind' },
    );
  }

  #pastMark() {
    throw new IdgenError('idgen: the wall clock reached the lease\'s mark before a renewal moved it', {
      code: 'expired',
    });
  }

  /**
   * `count` IDs, increasing (see `nextId`). The call holds the event loop, so no renewal
   * lands meanwhile: keep a batch well under the renewal period (a million IDs take about a
   * quarter of a second). A refusal midway throws, and the batch's IDs are not used.
   */
  nextIds(count) {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new RangeError(`idgen: count must be a whole number from 0; got ${count}`);
    }
    const ids = new Array(count);
    for (let i = 0; i < count; i += 1) ids[i] = this.nextId();
    return ids;
  }

  #scheduleRenewal() {
    this.#timer = setTimeout(() => this.#renew(), this.#terms.renewEveryMs);
    // A program that ends without close() is not kept alive: its lease runs out.
    this.#timer.unref();
  }

  async #renew() {
    try {
      await this.#tryRenewal();
    } catch (error) {
      // Nothing may escape a timer: a renewal that failed in any way keeps the terms.
      this.failedRenewals += 1;
      if (this.#state === 'valid') this.#scheduleRenewal();
    }
  }

  async #tryRenewal() {
    if (this.#state !== 'valid') return;
    const sentMono = this.#clock.monotonic();
    let response;
    try {
      // Not retried here: the next renewal is the retry, and a failed one keeps the terms.
      ({ response } = await this.#client.timedRequest('POST', `/v1/generators/${this.#terms.leaseId}/renew`, undefined, {
        retries: 0,
        timeoutMs: this.#terms.renewEveryMs,
        monotonic: () => this.#clock.monotonic(),
      }));
    } catch {
      response = undefined; // the service is away: keep the terms
    }
    if (this.#state !== 'valid') return;
    const terms = response?.status === 200 ? await renewedTerms(response, this.#terms) : undefined;
    if (this.#state !== 'valid') return;
    if (terms !== undefined) {
      this.#deadlineMono = Math.max(this.#deadlineMono, sentMono + (terms.validUntilMs - terms.serverNowMs));
      this.#markMs = Math.min(Math.max(this.#markMs, terms.validUntilMs), this.#endMs);
      this.renewals += 1;
    } else if (response?.status === 410 || response?.status === 404) {
      this.#state = 'lost';
      await response.arrayBuffer().catch(() => {});
      return;
    } else {
      if (response !== undefined && !response.bodyUsed) await response.arrayBuffer().catch(() => {});
      this.failedRenewals += 1;
    }
    this.#scheduleRenewal();
  }

  /**
   * Stops issuing and gives the number back: it is free after the last ID's millisecond.
   * Safe to call more than once.
   */
  async close() {
    return this.#release({});
  }

  /** close(), with the release request's options. */
  async #release(requestOptions) {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#state === 'lost') LeasedGenerator.#forget(this); // nothing to give back
    // Closed already: the release under way (a signal waits for it) forgets it when done.
    if (this.#state === 'closed' || this.#state === 'lost') return;
    this.#state = 'closed';
    const lastUsedMs = Math.max(this.#lastMs, this.#terms.resumeAfterMs);
    this.#releasing = this.#sendRelease(lastUsedMs, requestOptions);
    try {
      await this.#releasing;
    } finally {
      LeasedGenerator.#forget(this);
    }
  }

  async #sendRelease(lastUsedMs, requestOptions) {
    const response = await this.#client.request(
      'DELETE',
      `/v1/generators/${this.#terms.leaseId}`,
      { lastUsedMs },
      requestOptions,
    );
    await response.arrayBuffer();
    if (response.status !== 204 && response.status !== 410) {
      throw new IdgenError(`idgen: release: ${response.status}`, { status: response.status });
    }
  }

  // The generators that give their number back on SIGTERM and SIGINT, each until its release
  // has ended, and the one listener per signal that serves them all: the signal is passed on
  // once, after the last release (a listener per generator passed it on after the first,
  // and the process ended before the others' releases were answered).
  static #signalled = new Set();
  static #listeners = new Map();

  #handleSignals() {
    LeasedGenerator.#signalled.add(this);
    if (LeasedGenerator.#listeners.size > 0) return;
    for (const signal of ['SIGTERM', 'SIGINT']) {
      const listener = () => LeasedGenerator.#onSignal(signal);
      process.on(signal, listener);
      LeasedGenerator.#listeners.set(signal, listener);
    }
  }

  static #forget(generator) {
    LeasedGenerator.#signalled.delete(generator);
    if (LeasedGenerator.#signalled.size === 0) LeasedGenerator.#unlisten();
  }

  static #unlisten() {
    for (const [signal, listener] of LeasedGenerator.#listeners) process.off(signal, listener);
    LeasedGenerator.#listeners.clear();
  }

  static async #onSignal(signal) {
    // Heard once: a second signal while the numbers go back ends the process as it would have.
    LeasedGenerator.#unlisten();
    const releases = [...LeasedGenerator.#signalled].map((generator) => generator.#releaseOnSignal());
    await Promise.allSettled(releases);
    // Then end as the signal would have, unless the program listens for it too (its own
    // listener has run, and decides).
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  }

  #releaseOnSignal() {
    // One quick try: the number frees itself at the end of its term anyway, and a process
    // told to stop must not linger on a service that does not answer.
    if (this.#releasing === undefined) return this.#release(SIGNAL_RELEASE);
    // A close() under way, with the client's retries: waited for as long as one quick try.
    let timer;
    const bound = new Promise((resolve) => (timer = setTimeout(resolve, SIGNAL_RELEASE.timeoutMs)));
    return Promise.race([this.#releasing, bound]).finally(() => clearTimeout(timer));
  }
}
