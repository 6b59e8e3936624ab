/** Anything with a `fetch`: a service binding (`env.SLUICE`), for instance. */
export interface FetcherLike {
  fetch(input: string, init?: RequestInit): Promise<Response>;
}

/** A number of milliseconds, or a duration such as "10s", "10 s", "1m", "500ms", "1d". */
export type Duration = number | `${number}${"ms" | "s" | "m" | "h" | "d"}` | `${number} ${"ms" | "s" | "m" | "h" | "d"}`;

/**
 * What happens when Sluice cannot decide (a timeout, a network error, a 5xx
 * answer, an answer that is not Sluice's):
 * - "closed" (the default): refuse: `success: false` / `granted: false`, `retryAfter: 1000`;
 * - "open": admit: `success: true` / `granted: true` (a lease without `leaseId`);
 * - "throw": throw the SluiceUnavailableError.
 * Either way the result carries `reason` and `error`. A problem Sluice answers
 * with a 4xx (a bad request, a wrong token, a conflict) always throws.
 */
export type FailMode = "open" | "closed" | "throw";

export type Algorithm = "sliding_log" | "fixed_window";

export interface CallOptions {
  /** Milliseconds to wait for Sluice's answer (default: the client's, 1000). */
  timeout?: number;
  /** Cancels the call; it then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface DecisionOptions extends CallOptions {
  /** Default: the client's, "closed". */
  fail?: FailMode;
}

export interface SluiceOptions {
  /** A service binding to the Sluice Worker (`[[services]] binding = "SLUICE"`). */
  binding?: FetcherLike;
  /** Where Sluice is deployed, e.g. "https://limits.example.com" (without the prefix). */
  url?: string;
  /** Sluice's API_TOKEN secret; omit only for a Sluice configured with `api = "open"`. */
  token?: string;
  /** Sluice's `prefix` (default "/_sluice"). */
  prefix?: string;
  /** Default timeout of every call, in ms (default 1000). */
  timeout?: number;
  /** Default failure choice of every call (default "closed"). */
  fail?: FailMode;
  /** Default policy for `limit(identifier)`: at most `limit` in any `window`. */
  limit?: number;
  window?: Duration;
}

export interface Policy {
  name: string;
  limit: number;
  window: Duration;
  algorithm?: Algorithm;
}

export interface LimitRequest extends DecisionOptions {
  key: string;
  limit?: number;
  window?: Duration;
  algorithm?: Algorithm;
  /** Several policies, admitted together or not at all (instead of limit/window). */
  policies?: Policy[];
  /** Units this call takes (default 1); 0 only peeks. */
  cost?: number;
  /** Admit as a reservation, to `settle` once the outcome is known (not with cost 0). */
  reserve?: boolean;
  /** With `reserve` only: how long the reservation waits for its settle before it lapses
   * and is kept (1 ms to 1 day, default 60 s). */
  reservationTtl?: Duration;
}

/** One key of a layered call: its limit and window, or its policies. */
export interface Layer {
  key: string;
  /** What the answer and the RateLimit fields call it (default: the key when it is a valid
   * name, else "layers[i]"). */
  name?: string;
  limit?: number;
  window?: Duration;
  algorithm?: Algorithm;
  policies?: Policy[];
}

/** Several keys, admitted all together or not at all: every layer but the last reserves,
 * and what they took is given back when a later one refuses. */
export interface LayersRequest extends DecisionOptions {
  layers: Layer[];
  /** Units taken in every layer (default 1); 0 only peeks. */
  cost?: number;
}

/** Present when the result was made up because Sluice could not decide. */
export interface Degraded {
  reason?: "timeout" | "error";
  error?: SluiceUnavailableError;
}

export interface LimitResult extends Degraded {
  success: boolean;
  limit: number;
  remaining: number;
  /** When the next unit frees, in ms since the epoch. */
  reset: number;
  /** Ms until this same call could succeed: 0 when it did, null when no wait helps (cost above the limit). */
  retryAfter: number | null;
  /** The reservation's id, when the call reserved and succeeded; null otherwise. */
  reservation: string | null;
  /** Refused only because reservations not yet settled hold the units: `retryAfter` is then
   * at most 1000 ms, and a refund may free a unit at any moment. */
  pending: boolean;
}

export interface SettleRequest extends CallOptions {
  key: string;
  /** The id `limit({ reserve: true })` answered; null (a fail-open decision) settles nothing. */
  reservation: string | null;
  /** true: the reservation counts; false: its units are refunded at once. */
  keep: boolean;
}

export interface Settled {
  kept: boolean;
  /** The reservation was settled before; nothing changed this time. */
  repeated: boolean;
}

export interface PolicyResult {
  name: string;
  success: boolean;
  limit: number;
  /** The window in ms. */
  window: number;
  remaining: number;
  reset: number;
  retryAfter: number | null;
}

export interface PoliciesResult extends LimitResult {
  /** Names of the policies that refused. */
  violated: string[];
  policies: PolicyResult[];
}

/** One layer asked, read like a one-key answer. A layer before the one that refused admitted,
 * and its unit was given back; layers after it were not asked. */
export interface LayerResult extends Omit<LimitResult, "reservation" | "pending" | keyof Degraded> {
  name: string;
  key: string;
  /** For a layer given with `policies`. */
  violated?: string[];
  policies?: PolicyResult[];
}

export interface LayersResult extends LimitResult {
  /** The name of the layer that refused, if one did. */
  violated: string[];
  /** Each layer asked, in order. */
  layers: LayerResult[];
}

/** redis-cell's answer in Upstash's shape. */
export type ThrottleResult = Omit<LimitResult, "reservation" | "pending">;

export interface ThrottleRequest extends DecisionOptions {
  key: string;
  maxBurst: number;
  count: number;
  /** Whole seconds: "60s", "1m" or 60000. */
  period: Duration;
  /** Default 1; 0 only peeks. */
  quantity?: number;
}

export interface AcquireRequest extends DecisionOptions {
  key: string;
  /** Holders at once; fixed while any lease of the key is held. */
  limit: number;
  /** Lapses after this unless renewed (default 30 s). */
  ttl?: Duration;
  /** A label shown to operators; it grants nothing. */
  owner?: string;
  /** Re-enter this live lease (one more hold). */
  leaseId?: string;
}

export interface LeaseRef {
  key: string;
  leaseId: string | null;
}

export interface Lease extends Degraded {
  granted: boolean;
  key: string;
  leaseId: string | null;
  /** Greater than every fence the key granted before: hand it to your storage. */
  fence: number | null;
  /** When the lease lapses, in ms since the epoch. */
  expires: number | null;
  holds: number | null;
  inFlight: number | null;
  /** Ms until a lease could be free, when not granted. */
  retryAfter: number | null;
}

export interface LeaseState {
  key: string;
  leaseId: string | null;
  fence: number | null;
  expires: number | null;
  holds: number;
}

export interface WithLeaseOptions extends DecisionOptions {
  limit: number;
  ttl?: Duration;
  owner?: string;
  /** Ms to keep trying while every lease is held (default 0). */
  wait?: number;
  /** Renew every ttl/3 while fn runs (default true). */
  renew?: boolean;
  /** Called when the release fails; the lease then lapses after its ttl. */
  onReleaseError?: (error: unknown, lease: Lease) => void;
}

export type WithLockOptions = Omit<WithLeaseOptions, "limit">;

export declare class Sluice {
  constructor(options: SluiceOptions);
  limit(identifier: string, options?: Omit<LimitRequest, "key">): Promise<LimitResult>;
  limit(request: LimitRequest & { policies: Policy[] }): Promise<PoliciesResult>;
  limit(request: LimitRequest): Promise<LimitResult>;
  limit(request: LayersRequest): Promise<LayersResult>;
  /** Keeps or refunds a reservation; throws code "no-such-reservation" for an unknown or lapsed one. */
  settle(request: SettleRequest): Promise<Settled>;
  throttle(request: ThrottleRequest): Promise<ThrottleResult>;
  acquire(request: AcquireRequest): Promise<Lease>;
  renew(lease: LeaseRef, options?: CallOptions & { ttl?: Duration }): Promise<LeaseState>;
  release(lease: LeaseRef, options?: CallOptions): Promise<LeaseState & { released: boolean }>;
  withLease<T>(key: string, options: WithLeaseOptions, fn: (lease: Lease, lost: AbortSignal) => T | Promise<T>): Promise<T>;
  withLock<T>(key: string, fn: (lease: Lease, lost: AbortSignal) => T | Promise<T>): Promise<T>;
  withLock<T>(key: string, options: WithLockOptions, fn: (lease: Lease, lost: AbortSignal) => T | Promise<T>): Promise<T>;
}

/** A problem Sluice answered (RFC 9457 problem+json), or a call without an answer. */
export declare class SluiceError extends Error {
  /** The HTTP status; 0 when there was no answer. */
  status: number;
  /** Sluice's stable code: "invalid-request", "unauthorized", "policy-conflict",
   * "lease-limit-conflict", "no-such-lease", "no-such-reservation", "not-found", ..., or "timeout", "network",
   * "unavailable", "bad-answer", "lease-unavailable". */
  code: string;
  /** The input at fault, e.g. "limit", "window_ms", "policies[1].name", "lease_id". */
  field?: string;
  /** The whole problem body, with extras such as `policy` or `held-limit`. */
  problem?: Record<string, unknown>;
}

export declare class SluiceUnavailableError extends SluiceError {}

export declare class LeaseUnavailableError extends SluiceError {
  retryAfter: number | null;
}

export declare function durationMs(value: Duration, name?: string): number;
