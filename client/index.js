// A typed client for Sluice's decision API: limits and reservations,
// redis-cell's throttle, leases and locks. It talks to Sluice through a service binding (any object
// with `fetch`) or over HTTPS, and has no dependencies. See README.md.

const DEFAULT_PREFIX = "/_sluice";
/** A decision takes a few milliseconds; a second means Sluice is in trouble. */
const DEFAULT_TIMEOUT_MS = 1000;
/** Like Sluice's own `on_error`: a limiter that cannot decide refuses. */
const DEFAULT_FAIL = "closed";
const DEFAULT_TTL_MS = 30_000;
/** What a fail-closed answer asks the caller to wait, as Sluice's own 503 does. */
const FAIL_CLOSED_RETRY_MS = 1000;
const FAIL_MODES = ["open", "closed", "throw"];
const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The options each call takes. Anything else is refused, naming it, as
 * Sluice refuses a field it does not know: a misspelt option must never be
 * silently ignored (a dropped `reserve` would count every attempt). */
const CALL = ["timeout", "signal"];
const DECISION = [...CALL, "fail"];
const OPTIONS = {
  Sluice: ["binding", "url", "token", "prefix", "timeout", "fail", "limit", "window"],
  limit: ["key", "limit", "window", "algorithm", "policies", "cost", "reserve", "reservationTtl", "layers", ...DECISION],
  policy: ["name", "limit", "window", "algorithm"],
  layer: ["key", "name", "limit", "window", "algorithm", "policies"],
  throttle: ["key", "maxBurst", "count", "period", "quantity", ...DECISION],
  acquire: ["key", "limit", "ttl", "owner", "leaseId", ...DECISION],
  renew: ["ttl", ...CALL],
  release: CALL,
  settle: ["key", "reservation", "keep", ...CALL],
  withLease: ["limit", "ttl", "owner", "wait", "renew", "onReleaseError", ...DECISION],
  withLock: ["ttl", "owner", "wait", "renew", "onReleaseError", ...DECISION],
};

/** A problem Sluice answered (RFC 9457), or a call that never got an answer. */
export class SluiceError extends Error {
  constructor(message, { status = 0, code, field, problem, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "SluiceError";
    this.status = status;
    this.code = code;
    this.field = field;
    this.problem = problem;
  }
}

/** Sluice could not decide: a timeout, a network error, a 5xx answer or an
 * answer that is not Sluice's. Only these take the `fail` choice. */
export class SluiceUnavailableError extends SluiceError {
  constructor(message, options) {
    super(message, options);
    this.name = "SluiceUnavailableError";
  }
}

/** `withLease` or `withLock` found every lease held (after `wait`). */
export class LeaseUnavailableError extends SluiceError {
  constructor(key, retryAfter) {
    super(`every lease of ${JSON.stringify(key)} is held; retry in ${retryAfter ?? "?"} ms`, {
      status: 429,
      code: "lease-unavailable",
    });
    this.name = "LeaseUnavailableError";
    this.retryAfter = retryAfter;
  }
}

/** Milliseconds from a number (ms) or a duration such as "10s", "10 s",
 * "1m", "500ms", "1d" (Upstash's spelling works too). */
export function durationMs(value, name = "duration") {
  if (typeof value === "number" && Number.isInteger(value) && value > 0) return value;
  const match = typeof value === "string" ? /^(\d+)\s*(ms|s|m|h|d)$/.exec(value.trim()) : null;
  if (!match || Number(match[1]) <= 0) {
    throw new TypeError(`${name} must be a positive whole number of ms or a string like "10s", got ${JSON.stringify(value)}`);
  }
  return Number(match[1]) * UNITS[match[2]];
}

export class Sluice {
  /**
   * @param {object} options `binding` (a service binding) or `url` (where
   * Sluice is deployed); `token` (its API_TOKEN); `prefix`; defaults for
   * every call: `timeout` (ms), `fail`; and an optional default policy
   * (`limit`, `window`) for `limit(identifier)`.
   */
  constructor(options = {}) {
    checkOptions(options, "Sluice");
    const { binding, url, token, prefix = DEFAULT_PREFIX, timeout = DEFAULT_TIMEOUT_MS, fail = DEFAULT_FAIL } = options;
    if (binding && typeof binding.fetch === "function") {
      this.#fetch = (input, init) => binding.fetch(input, init);
      this.#base = `https://sluice${prefix}`;
    } else if (typeof url === "string" && /^https?:\/\//.test(url)) {
      this.#fetch = (input, init) => fetch(input, init);
      this.#base = url.replace(/\/+$/, "") + prefix;
    } else {
      throw new TypeError("Sluice needs a service binding (`binding`, with a fetch method) or a `url`");
    }
    this.#token = token;
    this.#defaults = { timeout: checkTimeout(timeout), fail: checkFail(fail) };
    if (options.limit !== undefined || options.window !== undefined) {
      this.#policy = { limit: options.limit, window: durationMs(options.window, "window") };
    }
  }

  #fetch;
  #base;
  #token;
  #defaults;
  #policy;

  /**
   * One decision: `limit("user:42")` with the default policy, or
   * `limit({ key, limit, window, cost, algorithm })`, or
   * `limit({ key, policies: [{ name, limit, window, algorithm }], cost })`.
   * With `reserve: true` an admission is a reservation (its id in
   * `reservation`), to `settle` once the outcome is known; it lapses into a
   * kept admission after `reservationTtl` (default 60 s).
   * `limit({ layers: [{ key, limit, window }, ...], cost })` decides for
   * several keys at once, all or nothing: a user's limit under a global one.
   */
  async limit(input, more = {}) {
    const call = typeof input === "string" ? { ...more, key: input } : { ...input, ...more };
    checkOptions(call, "limit");
    if (call.layers !== undefined) return this.#limitLayers(call);
    const body = { key: call.key, ...keyLimits(call, this.#policy, "limit") };
    if (call.cost !== undefined) body.cost = call.cost;
    if (call.reserve !== undefined && typeof call.reserve !== "boolean") {
      throw new TypeError(`limit: "reserve" must be true or false, got ${JSON.stringify(call.reserve)}`);
    }
    if (call.reserve) body.reserve = true;
    if (call.reservationTtl !== undefined) {
      if (!call.reserve) throw new TypeError('limit: "reservationTtl" is how long a reservation waits for its settle; send it with reserve: true');
      body.reservation_ttl_ms = durationMs(call.reservationTtl, "reservationTtl");
    }
    const fallbackLimit = body.limit ?? Math.min(...(body.policies ?? []).map((p) => p.limit));
    const form = body.policies ? { violated: [], policies: [] } : {};
    return this.#decide(call, "POST", "/v1/limit", body, limitResult, undecided(fallbackLimit, form));
  }

  /** `limit({ layers })`: every layer's key admitted, or none. */
  async #limitLayers(call) {
    const alone = ["key", "limit", "window", "algorithm", "policies", "reserve", "reservationTtl"].find((name) => call[name] !== undefined);
    if (alone !== undefined) {
      throw new TypeError(`limit: with "layers", each layer gives its key and limits (and a call with layers cannot reserve): leave "${alone}" out`);
    }
    if (!Array.isArray(call.layers) || call.layers.length === 0) {
      throw new TypeError(`limit: "layers" must be a non-empty array of { key, limit, window } or { key, policies }`);
    }
    const layers = call.layers.map((layer, i) => {
      checkOptions(layer, "layer");
      return {
        key: layer.key,
        ...(layer.name === undefined ? {} : { name: layer.name }),
        ...keyLimits(layer, undefined, `limit: layers[${i}]`),
      };
    });
    const body = { layers, ...(call.cost === undefined ? {} : { cost: call.cost }) };
    const fallbackLimit = Math.min(...layers.flatMap((l) => (l.policies ?? [l]).map((p) => p.limit)));
    return this.#decide(call, "POST", "/v1/limit", body, layersResult, undecided(fallbackLimit, { violated: [], layers: [] }));
  }

  /** Keeps (`keep: true`: it counts) or refunds (`keep: false`: its units are
   * free again at once) a reservation that `limit({ reserve: true })`
   * answered. Throws a SluiceError with code `no-such-reservation` for one
   * that is unknown or lapsed (and was kept). A decision made up by
   * `fail: "open"` holds no reservation (`reservation: null`): settling it
   * does nothing. */
  async settle(input) {
    checkOptions(input, "settle");
    if (typeof input.keep !== "boolean") {
      throw new TypeError(`settle: "keep" must be true (count the reservation) or false (refund it), got ${JSON.stringify(input.keep)}`);
    }
    if (input.reservation === null || input.reservation === undefined) return { kept: false, repeated: false };
    if (typeof input.reservation !== "string") {
      throw new TypeError(`settle: "reservation" must be the id limit() answered, got ${JSON.stringify(input.reservation)}`);
    }
    const body = { key: input.key, reservation: input.reservation, keep: input.keep };
    const answer = await this.#call("POST", "/v1/limit/settle", body, input);
    return { kept: answer.kept, repeated: answer.repeated };
  }

  /** redis-cell's `CL.THROTTLE key maxBurst count period quantity`; `period`
   * is whole seconds ("60s", "1m" or 60000). */
  async throttle(input) {
    checkOptions(input, "throttle");
    const periodMs = durationMs(input.period, "period");
    if (periodMs % 1000 !== 0) throw new TypeError("period must be whole seconds");
    const body = { key: input.key, max_burst: input.maxBurst, count: input.count, period_s: periodMs / 1000 };
    if (input.quantity !== undefined) body.quantity = input.quantity;
    return this.#decide(
      input,
      "POST",
      "/v1/throttle",
      body,
      (a, now) => ({
        success: !a.limited,
        limit: a.limit,
        remaining: a.remaining,
        reset: now + a.reset_after_ms,
        retryAfter: !a.limited ? 0 : a.retry_after_ms < 0 ? null : a.retry_after_ms,
      }),
      (reason, error, now) => ({ success: false, limit: input.maxBurst + 1, remaining: 0, reset: now, retryAfter: 0, reason, error }),
    );
  }

  /** A lease: one of `limit` holders of `key` at once, for `ttl` unless
   * renewed. With `leaseId`, re-enters that live lease. */
  async acquire(input) {
    checkOptions(input, "acquire");
    const body = { key: input.key, limit: input.limit, ttl_ms: durationMs(input.ttl ?? DEFAULT_TTL_MS, "ttl") };
    if (input.owner !== undefined) body.owner = input.owner;
    if (input.leaseId !== undefined) body.lease_id = input.leaseId;
    return this.#decide(
      input,
      "POST",
      "/v1/leases",
      body,
      (a) => ({
        granted: a.granted,
        key: input.key,
        leaseId: a.lease_id,
        fence: a.fence,
        expires: a.expires_ms,
        holds: a.holds,
        inFlight: a.in_flight,
        retryAfter: a.retry_after_ms,
      }),
      (reason, error) => ({
        granted: false,
        key: input.key,
        leaseId: null,
        fence: null,
        expires: null,
        holds: null,
        inFlight: null,
        retryAfter: 0,
        reason,
        error,
      }),
    );
  }

  /** Extends a live lease to now + `ttl` (default 30 s). Throws a
   * SluiceError with code `no-such-lease` when it lapsed or was released. */
  async renew(lease, options = {}) {
    checkOptions(options, "renew");
    const body = options.ttl === undefined ? {} : { ttl_ms: durationMs(options.ttl, "ttl") };
    const answer = await this.#call("POST", `${leasePath(lease)}/renew?key=${encodeURIComponent(lease.key)}`, body, options);
    return leaseState(lease.key, answer);
  }

  /** Drops one hold of a lease; `released` once it is free. A lease granted
   * by `fail: "open"` (no `leaseId`) has nothing to release. */
  async release(lease, options = {}) {
    checkOptions(options, "release");
    if (lease.leaseId == null) return { key: lease.key, leaseId: null, fence: null, expires: null, holds: 0, released: false };
    const answer = await this.#call("DELETE", `${leasePath(lease)}?key=${encodeURIComponent(lease.key)}`, undefined, options);
    return { ...leaseState(lease.key, answer), released: answer.released };
  }

  /**
   * Runs `fn(lease, signal)` while holding one of `limit` leases of `key`,
   * and releases it afterwards, whether `fn` returns or throws. While `fn`
   * runs, the lease is renewed every third of its `ttl`; if it is lost
   * anyway, `signal` aborts. Waits up to `wait` ms for a lease, then throws
   * LeaseUnavailableError (or, when Sluice could not decide and `fail` is
   * "closed", the SluiceUnavailableError). A failed release never hides `fn`'s outcome (the
   * lease lapses after its ttl); it goes to `onReleaseError` if given.
   */
  async withLease(key, options, fn) {
    checkOptions(options, "withLease");
    const ttl = durationMs(options.ttl ?? DEFAULT_TTL_MS, "ttl");
    const asked = { key, ttl, ...defined(options, ["limit", "owner", ...DECISION]) };
    const deadline = Date.now() + (options.wait ?? 0);
    // A holder may release at any moment, long before its lease would
    // lapse (retryAfter), so a waiter polls, backing off from 25 ms to 1 s.
    let pause = 25;
    let lease;
    for (;;) {
      lease = await this.acquire(asked);
      if (lease.granted) break;
      const left = deadline - Date.now();
      if (left <= 0) throw lease.error ?? new LeaseUnavailableError(key, lease.retryAfter);
      await sleep(Math.min(pause, lease.retryAfter || pause, left));
      pause = Math.min(pause * 2, 1000);
    }
    const lost = new AbortController();
    const renewal =
      lease.leaseId == null || options.renew === false
        ? null
        : setInterval(() => {
            this.renew(lease, { ttl, timeout: options.timeout }).catch((error) => {
              if (error.code === "no-such-lease") {
                clearInterval(renewal);
                lost.abort(error);
              }
            });
          }, Math.max(1, Math.floor(ttl / 3)));
    try {
      return await fn(lease, lost.signal);
    } finally {
      if (renewal !== null) clearInterval(renewal);
      try {
        await this.release(lease, { timeout: options.timeout });
      } catch (error) {
        options.onReleaseError?.(error, lease);
      }
    }
  }

  /** `withLease` with a limit of 1: `withLock(key, fn)` or
   * `withLock(key, { ttl, wait }, fn)`. */
  async withLock(key, options, fn) {
    if (typeof options === "function") return this.withLease(key, { limit: 1 }, options);
    checkOptions(options, "withLock");
    return this.withLease(key, { ...options, limit: 1 }, fn);
  }

  /** A call whose failure takes the caller's `fail` choice. */
  async #decide(call, method, path, body, result, failed) {
    const fail = checkFail(call.fail ?? this.#defaults.fail);
    try {
      return result(await this.#call(method, path, body, call), Date.now());
    } catch (error) {
      if (!(error instanceof SluiceUnavailableError) || fail === "throw") throw error;
      const reason = error.code === "timeout" ? "timeout" : "error";
      const answer = failed(reason, error, Date.now());
      if (fail === "open") return "granted" in answer ? { ...answer, granted: true } : { ...answer, success: true };
      return { ...answer, retryAfter: FAIL_CLOSED_RETRY_MS };
    }
  }

  /** One request to Sluice: the parsed JSON answer, or a SluiceError. */
  async #call(method, path, body, options) {
    const timeout = checkTimeout(options.timeout ?? this.#defaults.timeout);
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    const controller = new AbortController();
    const signal = options.signal;
    const onAbort = () => controller.abort(signal.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    let timer;
    const timedOut = new Promise((_, reject) => {
      timer = setTimeout(() => {
        const error = new SluiceUnavailableError(`Sluice did not answer within ${timeout} ms`, { code: "timeout" });
        controller.abort(error);
        reject(error);
      }, timeout);
    });
    const exchange = (async () => {
      const response = await this.#fetch(this.#base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
      return { response, text: await response.text() };
    })();
    let response;
    let text;
    try {
      ({ response, text } = await Promise.race([exchange, timedOut]));
    } catch (error) {
      if (error instanceof SluiceUnavailableError) throw error;
      if (signal?.aborted) throw signal.reason;
      throw new SluiceUnavailableError(`Sluice could not be reached: ${error.message}`, { code: "network", cause: error });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      exchange.catch(() => {});
    }
    let answer;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = undefined;
    }
    if (response.ok && answer !== null && typeof answer === "object") return answer;
    const problem = answer !== null && typeof answer === "object" && typeof answer.code === "string" ? answer : undefined;
    const details = {
      status: response.status,
      code: problem?.code ?? (response.ok ? "bad-answer" : "unavailable"),
      field: problem?.field,
      problem,
    };
    const message = problem?.detail ?? `Sluice answered ${response.status} without a problem body`;
    if (response.status >= 500 || response.ok || !problem) throw new SluiceUnavailableError(message, details);
    throw new SluiceError(message, details);
  }
}

/** The answer of `POST /v1/limit` in Upstash's shape, with absolute times:
 * `reset` when the next unit frees (unix ms), `retryAfter` in ms (`null`
 * when no wait can admit the request). The policies form reports the
 * policy that refused, or else the one with the fewest units left. */
function limitResult(a, now) {
  const reserved = { reservation: a.reservation ?? null, pending: a.pending === true };
  if (!Array.isArray(a.policies)) {
    return { success: a.allowed, limit: a.limit, remaining: a.remaining, reset: now + a.reset_ms, retryAfter: a.retry_after_ms, ...reserved };
  }
  const policies = a.policies.map((p) => ({
    name: p.name,
    success: p.allowed,
    limit: p.limit,
    window: p.window_ms,
    remaining: p.remaining,
    reset: now + p.reset_ms,
    retryAfter: p.retry_after_ms,
  }));
  const tightest =
    policies.find((p) => !p.success) ?? policies.reduce((best, p) => (p.remaining < best.remaining ? p : best), policies[0]);
  return {
    success: a.allowed,
    limit: tightest.limit,
    remaining: tightest.remaining,
    reset: tightest.reset,
    retryAfter: a.retry_after_ms,
    ...reserved,
    violated: a.violated,
    policies,
  };
}

/** What a limit call Sluice could not decide answers before the `fail`
 * choice: a refusal with the (smallest) limit asked, and `form`'s fields. */
function undecided(limit, form) {
  return (reason, error, now) => ({
    success: false,
    limit,
    remaining: 0,
    reset: now,
    retryAfter: 0,
    reservation: null,
    pending: false,
    ...form,
    reason,
    error,
  });
}

/** The answer of `POST /v1/limit` with `layers`: each layer asked read as
 * a one-key answer (with its `name` and `key`), and the whole as the
 * refusing layer, or else the one with the fewest units left. */
function layersResult(a, now) {
  const layers = a.layers.map((layer) => ({ name: layer.name, key: layer.key, ...limitResult(layer, now) }));
  const tightest =
    layers.find((l) => !l.success) ?? layers.reduce((best, l) => (l.remaining < best.remaining ? l : best), layers[0]);
  return {
    success: a.allowed,
    limit: tightest?.limit,
    remaining: tightest?.remaining,
    reset: tightest?.reset ?? now,
    retryAfter: a.retry_after_ms,
    reservation: null,
    pending: a.pending === true,
    violated: a.violated,
    layers: layers.map(({ reservation, pending, ...layer }) => layer),
  };
}

/** One key's limits as the API takes them: `policies`, or `limit` and
 * `window` (from the constructor's policy when the call has none). */
function keyLimits(input, defaults, where) {
  if (input.policies !== undefined) {
    return {
      policies: input.policies.map((p) => {
        checkOptions(p, "policy");
        return {
          name: p.name,
          limit: p.limit,
          window_ms: durationMs(p.window, `policies: ${p.name}.window`),
          ...(p.algorithm === undefined ? {} : { algorithm: p.algorithm }),
        };
      }),
    };
  }
  const limit = input.limit ?? defaults?.limit;
  const window = input.window ?? defaults?.window;
  if (limit === undefined || window === undefined) {
    const from = defaults === undefined ? "" : " (per call or in the constructor)";
    throw new TypeError(`${where} needs \`limit\` and \`window\`${from}, or \`policies\``);
  }
  return {
    limit,
    window_ms: durationMs(window, "window"),
    ...(input.algorithm === undefined ? {} : { algorithm: input.algorithm }),
  };
}

function leaseState(key, a) {
  return { key, leaseId: a.lease_id, fence: a.fence, expires: a.expires_ms, holds: a.holds };
}

function leasePath(lease) {
  if (!lease || typeof lease.key !== "string" || typeof lease.leaseId !== "string") {
    throw new TypeError("a lease is { key, leaseId }, as acquire() returns it");
  }
  return `/v1/leases/${encodeURIComponent(lease.leaseId)}`;
}

/** Refuses an option `call` does not take (see OPTIONS), naming it. */
function checkOptions(options, call) {
  if (options === null || typeof options !== "object") return;
  for (const name of Object.keys(options)) {
    if (!OPTIONS[call].includes(name)) {
      throw new TypeError(`${call}: unknown option ${JSON.stringify(name)}; it takes ${OPTIONS[call].join(", ")}`);
    }
  }
}

/** The options among `names` that `options` gives. */
function defined(options, names) {
  return Object.fromEntries(names.filter((name) => options[name] !== undefined).map((name) => [name, options[name]]));
}

function checkTimeout(timeout) {
  if (!Number.isFinite(timeout) || timeout <= 0) throw new TypeError(`timeout must be a positive number of ms, got ${timeout}`);
  return timeout;
}

function checkFail(fail) {
  if (!FAIL_MODES.includes(fail)) throw new TypeError(`fail must be "open", "closed" or "throw", got ${JSON.stringify(fail)}`);
  return fail;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
