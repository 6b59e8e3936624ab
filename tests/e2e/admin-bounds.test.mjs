// Every admin answer is bounded and every admin input validated, over HTTP
// on workerd: query parameters, a ban's reason, paged ban lists and top
// refused keys, stats that carry counts.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice } from "./harness.mjs";

const TOKEN = "bounds-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

const config = {
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 1, window: "1m" },
  ],
};

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN } });
});
after(() => sluice?.stop());

const get = (path) => sluice.fetch(`/_sluice/admin${path}`, { headers: admin });
const put = (path, body) =>
  sluice.fetch(`/_sluice/admin${path}`, {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function refusedNaming(response, field, what) {
  assert.equal(response.status, 400, what);
  assert.match(response.headers.get("content-type"), /^application\/problem\+json/, what);
  const problem = await response.json();
  assert.equal(problem.code, "invalid-request", what);
  assert.equal(problem.field, field, what);
  return problem;
}

describe("admin query parameters", () => {
  test("a bad top_minutes is a 400 naming it, like a bad since", async () => {
    for (const value of ["0", "61", "x", "-3", "", "1.5", "+5"]) {
      await refusedNaming(await get(`/stats?top_minutes=${encodeURIComponent(value)}`), "top_minutes", value);
    }
    await refusedNaming(await get("/stats?since=x"), "since", "since");
    for (const value of ["1", "60"]) {
      assert.equal((await get(`/stats?top_minutes=${value}`)).status, 200, value);
    }
  });

  test("an unknown or repeated parameter is a 400 naming it", async () => {
    await refusedNaming(await get("/stats?sinse=5"), "sinse", "misspelt");
    await refusedNaming(await get("/stats?since=1&since=2"), "since", "repeated");
    await refusedNaming(await get("/rules?x=1"), "x", "rules takes none");
  });
});

describe("a manual ban's reason", () => {
  test("is at most 200 bytes, as an override's", async () => {
    const problem = await refusedNaming(await put("/bans/192.0.2.44", { for: "1m", reason: "r".repeat(201) }), "reason", "201");
    assert.match(problem.detail, /200/);
    const ok = await put("/bans/192.0.2.44", { for: "1m", reason: "r".repeat(200) });
    assert.equal(ok.status, 200);
  });
});
