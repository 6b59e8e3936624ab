// Writes the JavaScript baseline (bench/js-sliding-log.mjs) in the shape of
// Sluice's per-call path into directory `dir`, as a build directory that
// bench/new-key-cpu.mjs runs under Sluice's wrangler.toml: the worker calls
// its key object by the runtime's RPC (`serve`: the call's JSON in, the
// reply's out) raced against `scheduler.wait`, and builds its own answer
// with RateLimit fields, where the baseline hands the object's `Response`
// on. The object's decision and SQL are the baseline's. Beside Sluice in
// one run, it tells the runtime's part of the per-call path (the RPC, the
// timer, an answer of its own) from what Sluice's wasm and glue add.
//   node bench/js-rpc.mjs /tmp/js-rpc && BENCH_SCRIPT=hot-key-per-call.lua taskset -c 0 node bench/new-key-cpu.mjs build /tmp/js-rpc
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [dir] = process.argv.slice(2);
if (!dir) throw new Error("usage: node bench/js-rpc.mjs <dir>");
let source = readFileSync(new URL("./js-sliding-log.mjs", import.meta.url), "utf8");
const change = (from, to) => {
  if (!source.includes(from)) throw new Error(`bench/js-sliding-log.mjs no longer has: ${from}`);
  source = source.replace(from, to);
};
change("export class JsLimiter {\n  constructor(ctx, env) {\n", "export class Limiter extends DurableObject {\n  constructor(ctx, env) {\n    super(ctx, env);\n");
change(
  "  async fetch(request) {\n    const { limit, window_ms: window } = await request.json();",
  "  serve(text) {\n    const { limit, window_ms: window } = JSON.parse(text);",
);
change("return Response.json({ allowed: true,", "return JSON.stringify({ allowed: true,");
change("return Response.json({ allowed: false,", "return JSON.stringify({ allowed: false,");
change(
  '    return stub.fetch("https://limiter/check", { method: "POST", body });',
  `    const reply = await Promise.race([stub.serve(body), scheduler.wait(2000)]);
    if (reply === undefined) return new Response("the key object did not answer in time", { status: 503 });
    const answer = JSON.parse(reply);
    const headers = {
      "ratelimit-policy": \`"default";q=\${limit};w=\${Math.ceil(window / 1000)}\`,
      ratelimit: \`"default";r=\${answer.remaining};t=\${Math.ceil(answer.reset_ms / 1000)}\`,
      "content-type": "application/json",
    };
    return new Response(reply, { headers });`,
);
// Sluice's wrangler.toml binds these classes too.
source = `import { DurableObject } from "cloudflare:workers";\n${source}export class Hub {}\nexport class Room {}\n`;
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "index.js"), source);
