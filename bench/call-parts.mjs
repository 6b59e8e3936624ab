// What parts of an object call and its answer cost the runtime alone, in
// µs: a worker runs 20 000 of one form in one request and answers the
// time per form (the runtime's clock, which in local workerd advances
// during CPU work), four rounds in turn. Forms: an object's id from its
// name; the id and a stub; a stub from an id kept across requests; and a
// decision's answer built as worker-rs builds it (a `Headers` and a `set`
// per field, the body copied into a `Uint8Array`), with the same fields as
// a plain object and the body as a string, and with no fields at all.
//   taskset -c 0 node bench/call-parts.mjs
import { Miniflare } from "miniflare";

const script = `
import { DurableObject } from "cloudflare:workers";
export class Echo extends DurableObject { serve(text) { return text; } }
const NAME = "api:percall-1764270000";
const TEXT = JSON.stringify({ allowed: true, limit: 1000000, remaining: 999000, reset_ms: 600000, retry_after_ms: 0 });
const BYTES = new TextEncoder().encode(TEXT);
const POLICY = '"default";q=1000000;w=600';
const LEFT = '"default";r=999000;t=600';
let kept;
const forms = {
  id_from_name: (env) => env.NS.idFromName(NAME),
  id_and_stub: (env) => env.NS.get(env.NS.idFromName(NAME)),
  stub_of_kept_id: (env) => env.NS.get((kept ??= env.NS.idFromName(NAME))),
  answer_as_worker_rs_builds_it: () => {
    const headers = new Headers();
    headers.set("ratelimit-policy", POLICY);
    headers.set("ratelimit", LEFT);
    headers.set("content-type", "application/json");
    const body = new Uint8Array(BYTES.length);
    body.set(BYTES);
    return new Response(body, { status: 200, headers });
  },
  answer_from_a_string_and_an_object: () =>
    new Response(TEXT, { status: 200, headers: { "ratelimit-policy": POLICY, ratelimit: LEFT, "content-type": "application/json" } }),
  answer_without_fields: () => new Response(TEXT),
};
export default {
  async fetch(request, env) {
    const form = forms[new URL(request.url).searchParams.get("form")];
    let last;
    const start = performance.now();
    for (let i = 0; i < 20000; i++) last = form(env);
    return new Response(String(((performance.now() - start) * 1000) / 20000) + (last ? "" : "?"));
  },
};`;
const mf = new Miniflare({ modules: true, script, compatibilityDate: "2026-04-01", durableObjects: { NS: { className: "Echo", useSQLite: true } } });
const FORMS = ["id_from_name", "id_and_stub", "stub_of_kept_id", "answer_as_worker_rs_builds_it", "answer_from_a_string_and_an_object", "answer_without_fields"];
const rows = FORMS.map(() => []);
for (let round = 0; round < 4; round++) {
  for (const [i, form] of FORMS.entries()) rows[i].push(Number.parseFloat(await (await mf.dispatchFetch(`http://bench/?form=${form}`)).text()));
}
await mf.dispose();
const lines = ["| form | µs each, in each round |", "|---|---|"];
for (const [i, form] of FORMS.entries()) lines.push(`| ${form} | ${rows[i].map((us) => us.toFixed(2)).join(", ")} |`);
process.stderr.write(`${lines.join("\n")}\n`);
