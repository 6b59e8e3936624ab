// A fleet of real browsers in one waiting room: headless Chromium
// (Debian's `chromium`, driven by puppeteer-core), 32 pages each in a
// browser context of its own (its own cookies) and from an address of its
// own, in a room of 4 shards with a challenge. Every page solves the
// challenge with its own script, waits on the page, is let in once, and
// leaves through the origin; a page on another site that embeds the shop's
// images adds nobody to the line.
// Heavy: 32 Chromium pages refreshing and solving keep both cores busy for minutes.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { join } from "node:path";
import { launch, skip, SHOTS } from "./browser.mjs";
import { Sluice } from "./harness.mjs";

const SECRET = "room-secret-for-the-fleet-test-0123456789";
const ADMIN = "room-fleet-admin-token-0123456789abcdef";
const PAGES = 32;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let sluice;
let browser;
let elsewhere;
before(async () => {
  if (skip) return;
  sluice = await Sluice.start({
    sluice: {
      rules: [{
        id: "shop", match: { path: "/shop/*" },
        waiting_room: { active: 4, per_minute: 600, shards: 4, refresh: "2s", session: "5m", challenge: { work: 12 } },
      }],
    },
    secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN },
  });
  // Another site: `localhost` is another site than `127.0.0.1`, whatever
  // the port, and both are trustworthy origins, so Chromium sends
  // Sec-Fetch-* to each.
  elsewhere = createServer((req, res) => {
    const shop = sluice.base.replace("localhost", "127.0.0.1");
    const images = Array.from({ length: 5 }, (_, i) => `<img src="${shop}/shop/i${i}.png" alt="">`).join("");
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><title>Elsewhere</title><p>A page of another site.</p>${images}`);
  });
  await new Promise((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await sluice?.stop();
  elsewhere?.close();
});

async function figures() {
  const response = await sluice.fetch("/_sluice/admin/rooms/shop", { headers: { authorization: `Bearer ${ADMIN}` } });
  const body = await response.json();
  return { ...body, calls: body.shards.reduce((sum, shard) => sum + shard.calls, 0) };
}

/** A page in a browser context of its own, from address `ip`, noting
 * what each load showed and any console error or exception. */
async function visitor(ip) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setExtraHTTPHeaders({ "cf-connecting-ip": ip });
  const seen = [];
  const problems = [];
  page.on("console", (message) => {
    const loaded503 = message.text() === "Failed to load resource: the server responded with a status of 503 (Service Unavailable)";
    if (message.type() === "error" && !loaded503) problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  // Each page load, as the browser got it: the challenge (a 503 whose
  // policy allows its script), the line (another 503), or the origin
  // (the session, from the cookie that came with it or the one it sent).
  page.on("response", (response) => {
    if (!response.request().isNavigationRequest()) return;
    const headers = response.headers();
    const kind = response.status() === 200 ? "in" : /script-src/.test(headers["content-security-policy"] ?? "") ? "challenge" : "line";
    const cookie = `${headers["set-cookie"] ?? ""}\n${response.request().headers().cookie ?? ""}`;
    const session = kind === "in" ? cookie.match(/sluice_room_shop=v1\.s\.shop\.(\d+)\.(\d+)\./)?.slice(1).join(".") : null;
    seen.push({ at: Date.now(), kind, session });
  });
  return { context, page, seen, problems };
}

/** A screenshot of a page that may be between two of its loads. */
async function shoot(page, name) {
  for (let tries = 0; tries < 20; tries++) {
    try {
      return await page.screenshot({ path: join(SHOTS, name) });
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`no screenshot of ${name}`);
}

describe("a fleet of browsers in one room", { skip }, () => {
  test("another site's page that embeds the shop's images adds nobody to the line", { timeout: 60_000 }, async () => {
    const before = await figures();
    const page = await (await browser.createBrowserContext()).newPage();
    await page.goto(`http://localhost:${elsewhere.address().port}/`, { waitUntil: "networkidle0" });
    const broken = await page.$$eval("img", (images) => images.filter((image) => image.complete && image.naturalWidth === 0).length);
    assert.equal(broken, 5, "each image was answered, none with an image");
    await page.close();
    const after = await figures();
    assert.equal(after.waiting + after.active, before.waiting + before.active, "nobody joined");
    assert.equal(after.calls - before.calls, after.shards.length, "no shard was asked (but by the figures themselves)");
  });

  test(`${PAGES} pages each solve the challenge, wait, and are let in once`, { timeout: 240_000 }, async () => {
    const fleet = [];
    for (let i = 0; i < PAGES; i++) fleet.push(await visitor(`10.77.0.${i + 1}`));
    const base = sluice.base.replace("localhost", "127.0.0.1");
    // Arriving 100 ms apart; each page goes on by itself from there (its
    // script, then its refreshes), so no load is awaited.
    for (const v of fleet) {
      v.page.goto(`${base}/shop/item`, { timeout: 0 }).catch(() => {});
      await sleep(100);
    }
    await shoot(fleet[PAGES - 1].page, "room-fleet-waiting.png");
    // Each page, once in (the origin's page shown, its session cookie
    // stored), leaves through the origin; its context is closed then, so
    // that it cannot join again.
    const leave = async (v) => {
      while (!v.seen.some((s) => s.kind === "in")) await sleep(100);
      await v.page.waitForFunction(() => document.body?.textContent.includes("sluice demo"), { timeout: 0 });
      await v.page.goto(`${base}/shop/done?room=end`, { waitUntil: "load", timeout: 0 });
      await v.context.close();
    };
    await Promise.all(fleet.map(leave));
    const sessions = fleet.map((v) => v.seen.filter((s) => s.kind === "in").map((s) => s.session));
    for (const [i, mine] of sessions.entries()) {
      assert.ok(mine.every(Boolean), `page ${i}'s session is known: ${mine}`);
      assert.equal(new Set(mine).size, 1, `page ${i} was let in once: ${mine}`);
    }
    assert.equal(new Set(sessions.map((mine) => mine[0])).size, PAGES, "each with a session of its own");
    for (const [i, v] of fleet.entries()) {
      const kinds = v.seen.map((s) => s.kind);
      assert.equal(kinds[0], "challenge", `page ${i} was challenged first: ${kinds}`);
      assert.equal(kinds.filter((k) => k === "challenge").length, 1, `page ${i} solved it at once: ${kinds}`);
      assert.deepEqual(v.problems, [], `page ${i}`);
    }
    const waited = fleet.filter((v) => v.seen.some((s) => s.kind === "line")).length;
    assert.ok(waited >= PAGES / 2, `only ${waited} pages waited in line: the room was never full`);
    // Arrival (the first load in line, or straight in) and entry of each
    // page, for the order across shards: the room's promise of arrival
    // order within its bound is asserted where it is built (room-line).
    const order = fleet.map((v) => ({
      arrived: v.seen.find((s) => s.kind !== "challenge")?.at,
      entered: v.seen.find((s) => s.kind === "in")?.at,
    }));
    assert.ok(order.every((o) => o.arrived <= o.entered));
    const report = await figures();
    assert.deepEqual([report.active, report.waiting], [0, 0], "every session ended, nobody left waiting");
  });
});
