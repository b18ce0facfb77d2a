// Types of idgen-client (index.js): no build step is needed to use them.

export type Kind = 'snowflake' | 'uuidv7' | 'ulid';

/** The clocks a generator reads. */
export interface Clock {
  /** The wall clock, Unix ms: it dates IDs. */
  now(): number;
  /** A clock in ms that never steps back (any origin): it keeps deadlines. */
  monotonic(): number;
}

/** `Date.now()` and `performance.now()`. */
export const systemClock: Clock;

/** Any refusal of the service or of the generator. */
export class IdgenError extends Error {
  constructor(message: string, options?: { status?: number; code?: IdgenError['code'] });
  /** The HTTP status, for an answer of the service. */
  readonly status?: number;
  /** What kind of refusal. */
  readonly code: 'http' | 'expired' | 'lost' | 'not-yet' | 'clock-behind' | 'closed';
}

export interface ClientOptions {
  /** The lease API's bearer token (only the lease API needs it). */
  token?: string;
  /** How many times a 503 or a failed connection is tried again (default 4). */
  retries?: number;
  /** The first wait before trying again, doubled each time (default 100 ms). */
  backoffMs?: number;
  /** The longest single wait, `Retry-After` included (default 5000 ms). */
  maxWaitMs?: number;
  /** How long one attempt may take (default 10000 ms). */
  timeoutMs?: number;
}

export interface RequestOptions {
  /** Overrides the client's `retries` for this request. */
  retries?: number;
  /** Overrides the client's `timeoutMs` for this request. */
  timeoutMs?: number;
  /** The clock `timedRequest` times the attempt on (default `systemClock.monotonic`). */
  monotonic?: () => number;
}

export interface TimedResponse {
  response: Response;
  /** When the attempt answered was sent, on the monotonic clock. */
  sentMono: number;
  /** When its answer came. */
  receivedMono: number;
}

export interface Decoded {
  id: string;
  kind: Kind;
  createdAt: string;
  datacenter?: number;
  worker?: number;
  sequence?: number;
  opaque?: string;
}

export interface Layout {
  timeBits: number;
  datacenterBits: number;
  workerBits: number;
  sequenceBits: number;
  epoch: string;
  lifetimeYears: number;
  lastInstant: string;
  datacenters: number;
  workersPerDatacenter: number;
  nodes: number;
  idsPerSecondPerNode: number;
  clusterIdsPerSecond: number;
}

export interface LeaseTerms {
  leaseId: string;
  datacenter: number;
  worker: number;
  ttlMs: number;
  resumeAfterMs: number;
  validUntilMs: number;
  renewEveryMs: number;
  serverNowMs: number;
  layout: Layout;
}

/** An `idgen serve` over HTTP. */
export class Client {
  constructor(url: string, options?: ClientOptions);
  /** `count` Snowflake IDs, increasing, as bigints. */
  ids(count: number, kind?: 'snowflake'): Promise<bigint[]>;
  /** `count` UUIDv7s or ULIDs, increasing, as their text. */
  ids(count: number, kind: 'uuidv7' | 'ulid'): Promise<string[]>;
  /** `count` IDs of a kind known only at run time. */
  ids(count: number, kind: Kind): Promise<bigint[] | string[]>;
  decode(id: bigint | string): Promise<Decoded>;
  layout(): Promise<Layout>;
  /** A raw request, tried again on 503, failed connections and timeouts. */
  request(method: string, path: string, body?: unknown, options?: RequestOptions): Promise<Response>;
  /** `request`, and when the attempt answered was sent and answered. */
  timedRequest(method: string, path: string, body?: unknown, options?: RequestOptions): Promise<TimedResponse>;
}

export interface LeaseOptions extends ClientOptions {
  /** The lease API's bearer token. */
  token: string;
  /** A name for operators (default `node pid N`). */
  holder?: string;
  /**
   * Release the number on SIGTERM and SIGINT, then end as the signal would once every
   * generator's release has ended (default true).
   */
  handleSignals?: boolean;
  /** How far back the wall clock may step and be ridden out (default 10 ms). */
  clockBackToleranceMs?: number;
  /** The clocks it reads (default `systemClock`). */
  clock?: Clock;
}

/** Snowflake IDs made in this process on a worker number leased from the service. */
export class LeasedGenerator {
  static lease(url: string, options: LeaseOptions): Promise<LeasedGenerator>;
  /**
   * A generator on terms the service gave to a lease request sent at `sentMono` and
   * answered at `receivedMono` (on `clock.monotonic()`); it does not renew. `lease` makes
   * one and renews it.
   */
  constructor(
    client: Client,
    terms: LeaseTerms,
    sentMono: number,
    receivedMono: number,
    options?: { clockBackToleranceMs?: number; clock?: Clock },
  );
  readonly terms: LeaseTerms;
  readonly worker: number;
  readonly datacenter: number;
  readonly state: 'valid' | 'expired' | 'lost' | 'closed';
  renewals: number;
  failedRenewals: number;
  /** The next ID; throws an IdgenError rather than an ID it cannot vouch for. */
  nextId(): bigint;
  /** `count` IDs at once: keep a batch well under the renewal period (it holds the event loop). */
  nextIds(count: number): bigint[];
  /** Stops issuing and gives the number back. */
  close(): Promise<void>;
}
