// Types of idgen-client (index.js): no build step is needed to use them.

export type Kind = 'snowflake' | 'uuidv7' | 'ulid';

/** Any refusal of the service or of the generator. */
export class IdgenError extends Error {
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
  decode(id: bigint | string): Promise<Decoded>;
  layout(): Promise<Layout>;
  /** A raw request, tried again on 503 and failed connections. */
  request(method: string, path: string, body?: unknown): Promise<Response>;
}

export interface LeaseOptions extends ClientOptions {
  /** The lease API's bearer token. */
  token: string;
  /** A name for operators (default `node pid N`). */
  holder?: string;
  /** Release the number on SIGTERM and SIGINT, then end as the signal would (default true). */
  handleSignals?: boolean;
  /** How far back the wall clock may step and be ridden out (default 10 ms). */
  clockBackToleranceMs?: number;
}

/** Snowflake IDs made in this process on a worker number leased from the service. */
export class LeasedGenerator {
  static lease(url: string, options: LeaseOptions): Promise<LeasedGenerator>;
  readonly terms: LeaseTerms;
  readonly worker: number;
  readonly datacenter: number;
  readonly state: 'valid' | 'expired' | 'lost' | 'closed';
  renewals: number;
  failedRenewals: number;
  /** The next ID; throws an IdgenError rather than an ID it cannot vouch for. */
  nextId(): bigint;
  nextIds(count: number): bigint[];
  /** Stops issuing and gives the number back. */
  close(): Promise<void>;
}
