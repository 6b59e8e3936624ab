// An API of yours, limited by Sluice through a service binding:
//   GET  /hello   at most 5 per 10 s per client address; 429 with Retry-After beyond
//   POST /report  one report at a time (a lock); 409 while another runs
// SLUICE is the binding to the Sluice Worker; SLUICE_API_TOKEN is Sluice's
// API_TOKEN, set with `wrangler secret put SLUICE_API_TOKEN` (leave it unset
// only when Sluice runs with api = "open").
import { Sluice, SluiceError, LeaseUnavailableError } from "sluice-client";

export default {
  async fetch(request, env) {
    const sluice = new Sluice({ binding: env.SLUICE, token: env.SLUICE_API_TOKEN, timeout: 500 });
    const url = new URL(request.url);
    try {
      if (url.pathname === "/hello" && request.method === "GET") return await hello(sluice, request);
      if (url.pathname === "/report" && request.method === "POST") return await report(sluice, url);
      return Response.json({ error: "not-found" }, { status: 404 });
    } catch (error) {
      // A mistake Sluice reported (a wrong token, a bad request): fix it,
      // do not serve around it.
      if (error instanceof SluiceError) {
        console.error(`sluice: ${error.status} ${error.code}: ${error.message}`);
        return Response.json({ error: "limiter", code: error.code }, { status: 500 });
      }
      throw error;
    }
  },
};

async function hello(sluice, request) {
  const ip = request.headers.get("cf-connecting-ip") ?? "unknown";
  // Fail closed (the default): when Sluice cannot decide, refuse.
  const decision = await sluice.limit({ key: `hello:${ip}`, limit: 5, window: "10s" });
  if (!decision.success) {
    const seconds = Math.max(1, Math.ceil((decision.retryAfter ?? 10_000) / 1000));
    return Response.json(
      { error: "rate-limited", retryAfter: decision.retryAfter },
      { status: 429, headers: { "retry-after": String(seconds) } },
    );
  }
  return Response.json({ hello: ip, remaining: decision.remaining, reset: decision.reset });
}

async function report(sluice, url) {
  const holdMs = Math.min(Number(url.searchParams.get("hold_ms") ?? 0) || 0, 5000);
  try {
    return await sluice.withLock("report", { ttl: "30s" }, async (lock) => {
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      return Response.json({ report: "done", fence: lock.fence });
    });
  } catch (error) {
    if (error instanceof LeaseUnavailableError) {
      return Response.json({ error: "report-running", retryAfter: error.retryAfter }, { status: 409 });
    }
    throw error;
  }
}
