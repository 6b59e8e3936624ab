// The waiting page in a real browser: headless Chromium (Debian's
// `chromium`, driven by puppeteer-core) waits on the page, sees its
// position fall as the visitors ahead are let in and leave, and is let in
// without anyone touching it. The page fails its test on any console
// error (a blocked style shows there) or script. Screenshots of the page
// on a desktop and on a phone go to build/screenshots/. The dashboard shows
// each room, and its rule's buttons pause and open it.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { launch, skip, SHOTS } from "./browser.mjs";
import { Sluice } from "./harness.mjs";
import { Visitor } from "./room-visitor.mjs";

const SECRET = "room-secret-for-the-browser-test-01234567";
const ADMIN = "room-browser-admin-token-0123456789abcdef";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const place = (id, fields) => ({ id, match: { path: `/${id}/*` }, waiting_room: { active: 1, per_minute: 600, shards: 1, ...fields } });

let sluice;
let browser;
before(async () => {
  if (skip) return;
  sluice = await Sluice.start({
    sluice: {
      rules: [
        place("shop", { refresh: "1s" }),
        // 1,293 visitors join this one from one address: one join key's
        // object, rather than as many new ones as visitors.
        place("sale", { refresh: "20s", session: "10m", join: { limit: 2_000, window: "1m" } }),
        place("launch", { refresh: "1m", opens_at: new Date(Date.now() + 2 * 3_600_000 + 5 * 60_000).toISOString() }),
      ],
    },
    secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN },
  });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await sluice?.stop();
});

const visitor = () => new Visitor((path, init) => sluice.fetch(path, init));

/** A browser page that records console errors, exceptions and dialogs. */
async function open({ width = 1280, height = 800, dark = false, mobile = false } = {}) {
  const page = await browser.newPage();
  await page.setViewport({ width, height, deviceScaleFactor: mobile ? 2 : 1, isMobile: mobile, hasTouch: mobile });
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: dark ? "dark" : "light" }]);
  const problems = [];
  page.on("console", (message) => {
    // The page is a 503 (come back later), which Chromium notes on its
    // console for every load; anything else is a fault.
    const loaded503 = message.text() === "Failed to load resource: the server responded with a status of 503 (Service Unavailable)";
    if (message.type() === "error" && !loaded503) problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`exception: ${error.message}`));
  page.on("dialog", async (dialog) => {
    problems.push(`dialog: ${dialog.type()}`);
    await dialog.dismiss();
  });
  return { page, problems };
}

const figures = (page) => page.$$eval("dd", (nodes) => nodes.map((node) => node.textContent));

describe("the waiting page", { skip }, () => {
  test("a visitor waits on the page, sees its position fall and is let in without touching anything", { timeout: 90_000 }, async () => {
    const holder = visitor();
    assert.equal((await holder.get("/shop/now")).status, 200);
    const ahead = [visitor(), visitor(), visitor()];
    for (const v of ahead) assert.equal((await v.get("/shop/now")).status, 503);

    const { page, problems } = await open();
    const seen = [];
    page.on("load", async () => {
      try {
        const title = await page.title();
        if (title === "You are in line") seen.push(Number((await figures(page))[0].replace(/,/g, "")));
        else seen.push("in");
      } catch {
        // The page navigated again while it was read: the next load counts.
      }
    });
    await page.goto(`${sluice.base}/shop/now`, { waitUntil: "load" });
    assert.equal(await page.title(), "You are in line");
    // The style applied: the CSP's hash matches what the page sends.
    const radius = await page.$eval("main", (main) => getComputedStyle(main).borderTopLeftRadius);
    assert.equal(radius, "12px");
    assert.equal(await page.$eval("meta[http-equiv=refresh]", (m) => m.content), "1");
    assert.equal(await page.evaluate(() => document.scripts.length), 0);

    // The holder leaves; each visitor ahead is let in, stays a moment,
    // and leaves through the origin, while the page refreshes itself.
    await sleep(1_500);
    await holder.get("/shop/done?room=end");
    for (const v of ahead) {
      for (;;) {
        const answer = await v.get("/shop/now");
        if (answer.status === 200) break;
        await sleep(250);
      }
      await sleep(1_500);
      await v.get("/shop/done?room=end");
    }
    await page.waitForFunction(() => document.body.textContent.includes("sluice demo"), { timeout: 20_000 });
    const numbers = seen.filter((s) => s !== "in");
    assert.equal(seen.at(-1), "in", `the page ended on ${seen.at(-1)}`);
    assert.equal(numbers[0], 4);
    for (let i = 1; i < numbers.length; i++) assert.ok(numbers[i] <= numbers[i - 1], `the position rose: ${numbers}`);
    assert.ok(new Set(numbers).size >= 3, `the position fell step by step: ${numbers}`);
    const cookies = await page.cookies();
    assert.equal(cookies.length, 1);
    assert.match(cookies[0].value, /^v1\.s\.shop\./, "a session cookie now");
    assert.equal(cookies[0].httpOnly, true);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("screenshots: in line on a desktop and a phone, and before opening", { timeout: 60_000 }, async () => {
    // A minute's turnover first (sixty visitors in and out), so the
    // estimate is the shard's pace rather than its guess.
    for (let i = 0; i < 60; i++) {
      const passing = new Visitor((path, init) => sluice.fetch(path, init), "198.18.0.1");
      assert.equal((await passing.get("/sale/now")).status, 200);
      if (i < 59) await passing.get("/sale/done?room=end");
    }
    const ahead = Array.from({ length: 1_233 }, () => new Visitor((path, init) => sluice.fetch(path, init), "198.18.0.1"));
    for (let i = 0; i < ahead.length; i += 50) {
      await Promise.all(ahead.slice(i, i + 50).map((v) => v.get("/sale/now")));
    }
    const desktop = await open();
    await desktop.page.goto(`${sluice.base}/sale/now`, { waitUntil: "load" });
    assert.deepEqual(await figures(desktop.page), ["1,234", "21 min"]);
    await desktop.page.screenshot({ path: join(SHOTS, "room-desktop.png") });
    assert.deepEqual(desktop.problems, []);

    const phone = await open({ width: 390, height: 844, mobile: true });
    await phone.page.goto(`${sluice.base}/sale/now`, { waitUntil: "load" });
    assert.equal((await figures(phone.page))[0], "1,234", "the same browser, the same ticket: the same place");
    const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    assert.equal(overflow, false, "nothing wider than the phone");
    await phone.page.screenshot({ path: join(SHOTS, "room-phone.png") });
    assert.deepEqual(phone.problems, []);

    const before = await open({ width: 390, height: 844, mobile: true, dark: true });
    await before.page.goto(`${sluice.base}/launch/now`, { waitUntil: "load" });
    assert.equal(await before.page.title(), "Opening soon");
    const [, opensIn] = await figures(before.page);
    assert.match(opensIn, /^2 h [56] min$/);
    await before.page.screenshot({ path: join(SHOTS, "room-before-opening-phone-dark.png") });
    assert.deepEqual(before.problems, []);
    for (const { page } of [desktop, phone, before]) await page.close();
  });

  test("the dashboard shows each room, now and over the last hour", { timeout: 60_000 }, async () => {
    const { page, problems } = await open({ width: 1280, height: 900 });
    await page.goto(`${sluice.base}/_sluice/admin/`, { waitUntil: "load" });
    await page.waitForSelector("#token", { visible: true });
    await page.type("#token", ADMIN);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#rooms-section:not([hidden]) [data-room=sale] .room-figures dd");
    const cards = await page.$$eval("#rooms [data-room]", (nodes) => nodes.map((node) => node.dataset.room));
    assert.deepEqual(cards, ["shop", "sale", "launch"]);
    const sale = await page.$$eval("[data-room=sale] .room-figures dd", (nodes) => nodes.map((node) => node.textContent));
    assert.equal(sale[0], "1,234", "waiting: 1,233 visitors and the browser");
    assert.equal(sale[1], "1 of 1", "active");
    assert.match(sale[2], /^\d+ of 600$/, "admitted in the last minute");
    const opening = await page.$eval("[data-room=launch] header p", (node) => node.textContent);
    assert.match(opening, /^opens [^·]+ · sessions last 5m · pages refresh every 1m$/);
    assert.doesNotMatch(opening, /T\d\d:/, "a date as people read it");
    // The chart has a point for this minute, and the traffic panel counts
    // the room's joins, as its join limit decided them.
    await page.waitForSelector("[data-room=sale] .chart canvas");
    await page.waitForSelector("#traffic [data-rule=sale] .admitted b");
    const joins = await page.$eval("#traffic [data-rule=sale] .admitted b", (node) => node.textContent);
    assert.ok(Number(joins.replace(/,/g, "")) >= 1_234, `${joins} joins counted`);
    const listed = await page.$eval("#rules tr[data-rule=sale]", (row) => row.textContent);
    assert.match(listed, /waiting room: 1 at once, 600 a minute, 1 shard/);
    const roomState = (room) => page.$eval(`[data-room=${room}] .room-state`, (node) => node.textContent);
    assert.equal(await roomState("sale"), "open");

    // The rule's Pause button holds the room: its card says so, with the
    // reason, and so does the page of a visitor waiting in it.
    await page.type("#state-reason", "stock count");
    // Clicked in the page, at once: a refresh redraws the table.
    await page.$eval('#rules tr[data-rule="sale"] button[aria-label="Pause rule sale"]', (button) => button.click());
    await page.waitForFunction(() => document.querySelector("[data-room=sale] .room-state .tag")?.textContent === "paused", { timeout: 15_000 });
    assert.equal(await roomState("sale"), "paused stock count");
    assert.equal(await page.$eval('#rules tr[data-rule="sale"] .state-cell .tag', (node) => node.textContent), "paused");
    assert.equal(await page.$eval("[data-room=sale] .shard-table tbody .tag", (node) => node.textContent), "paused");
    const waiting = await open();
    await waiting.page.goto(`${sluice.base}/sale/now`, { waitUntil: "load" });
    assert.equal(await waiting.page.title(), "You are in line");
    assert.equal((await figures(waiting.page))[0], "1,234", "the place is kept");
    assert.match(await waiting.page.$eval(".note", (node) => node.textContent), /^Entry is paused\. Nobody is let in until it resumes; you keep your place in line\. Why: stock count$/);
    await waiting.page.screenshot({ path: join(SHOTS, "room-paused.png") });
    assert.deepEqual(waiting.problems, []);
    await waiting.page.close();
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(SHOTS, "room-dashboard.png") });

    await page.$eval('#rules tr[data-rule="sale"] button[aria-label="Open rule sale"]', (button) => button.click());
    await page.waitForFunction(() => document.querySelector("[data-room=sale] .room-state .tag")?.textContent === "open", { timeout: 15_000 });
    assert.deepEqual(problems, []);
    await page.close();
  });
});
