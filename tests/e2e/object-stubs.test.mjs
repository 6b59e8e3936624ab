// What the runtime lets a worker keep of a Durable Object between requests
// (BENCHMARKS.md, "The call itself, a third time"): an id made in one
// request reaches its object from later ones, a stub does not. So a stub
// cannot be cached per isolate; an id can, though keeping it saves only
// `idFromName`, about 2 µs a call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Miniflare } from "miniflare";
import { sluiceWorkerOptions } from "./harness.mjs";

test("the runtime lets an id serve later requests, not a stub", async () => {
  const script = `
    import { DurableObject } from "cloudflare:workers";
    let id, stub;
    export class Echo extends DurableObject { serve(text) { return text; } }
    export default {
      async fetch(request, env) {
        try {
          if (new URL(request.url).pathname === "/id") {
            id ??= env.NS.idFromName("k");
            return new Response(await env.NS.get(id).serve("id"));
          }
          stub ??= env.NS.get(env.NS.idFromName("k"));
          return new Response(await stub.serve("stub"));
        } catch (e) {
          return new Response(e.message, { status: 500 });
        }
      },
    };`;
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: sluiceWorkerOptions().compatibilityDate,
    durableObjects: { NS: { className: "Echo", useSQLite: true } },
    host: "127.0.0.1",
    port: 0,
  });
  try {
    const url = (await mf.ready).toString().replace(/\/$/, "");
    const answers = [];
    for (const path of ["/id", "/id", "/stub", "/stub"]) {
      const response = await fetch(url + path);
      answers.push([response.status, await response.text()]);
    }
    assert.deepEqual(answers.slice(0, 3), [[200, "id"], [200, "id"], [200, "stub"]], "a kept id serves a later request");
    assert.equal(answers[3][0], 500, "a stub made in another request is refused");
    assert.match(answers[3][1], /Cannot perform I\/O on behalf of a different request/);
  } finally {
    await mf.dispose();
  }
});
