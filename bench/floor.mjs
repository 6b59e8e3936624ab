// The floor under a decision from an admission block: a worker that reads
// the decision API's call (the token, the JSON body) and answers what
// Sluice answers a hot key admitted from a block, the same status,
// headers and body, without deciding anything. What workerd spends on it
// is the runtime's own share of such a decision (its HTTP handling, the
// body, the `Response`); Sluice's CPU per decision less this floor's is
// Sluice's own. `BENCH_FLOOR=1 node bench/new-key-cpu.mjs` runs it beside
// the builds.
export default {
  async fetch(request, env) {
    if (request.headers.get("authorization") !== `Bearer ${env.API_TOKEN}`) return new Response(null, { status: 401 });
    const call = JSON.parse(await request.text());
    const limit = call.limit;
    const window = Math.ceil(call.window_ms / 1000);
    return new Response(`{"allowed":true,"limit":${limit},"remaining":0,"reset_ms":${call.window_ms},"retry_after_ms":0}`, {
      headers: {
        "content-type": "application/json",
        ratelimit: `"default";r=0;t=${window}`,
        "ratelimit-policy": `"default";q=${limit};w=${window}`,
      },
    });
  },
};
