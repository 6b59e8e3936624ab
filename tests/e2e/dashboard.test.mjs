// The operator's dashboard in a real browser: headless Chromium (Debian's
// `chromium` package, driven by puppeteer-core) against the built worker
// on workerd. Every page fails its test on a console error, an uncaught
// exception or an alert.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { launch, skip, SHOTS } from "./browser.mjs";
import { Sluice } from "./harness.mjs";

const TOKEN = "dashboard-token-for-e2e-0123456789-abcdef";
const XSS = ['<img src=x onerror=alert(1)>', '"><script>alert(2)</script>'];

const JWT_SECRET = "dashboard-e2e-jwt-secret-0123456789-abcdef";
const ROOM_SECRET = "dashboard-e2e-room-secret-0123456789-abcdef";
const config = {
  jwt: { secret: "JWT_SECRET" },
  rules: [
    { id: "api", match: { path: "/api/*", methods: ["GET", "POST"] }, limit: 3, window: "1m" },
    {
      id: "login", match: { path: "/login" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "10m", multiplier: 2, max: "1h" },
    },
    { id: "search", match: { path: "/search" }, key: "header:x-user", limit: 1, window: "1m", shadow: false, local: false },
    { id: "sale", match: { path: "/buy" }, scope: "global", split: 2, limit: 1000, window: "1s", algorithm: "fixed_window" },
    { id: "report", match: { path: "/report" }, concurrency: 2, on_error: "allow" },
    { id: "tiers", match: { path: "/tiers" }, tiers: [
      { name: "pro", when: { claim: "plan", in: ["pro"] }, limit: 100, window: "1m" },
      { name: "free", key: "header:x-user", limit: 1, window: "1m" },
    ] },
    { id: "flash", match: { path: "/flash" }, scope: "global", split: 2, limit: 2, window: "1m" },
    { id: "drop", match: { path: "/drop" }, scope: "global", split: 2, limit: 10, window: "1h" },
    { id: "cart", match: { path: "/cart" }, key: "header:x-user", limit: 1, window: "1m",
      also: [{ id: "all", scope: "global", split: 2, limit: 10, window: "1h" }] },
    { id: "hall", match: { path: "/hall/*" }, waiting_room: { active: 5, per_minute: 60 } },
  ],
};

let sluice;
let browser;
before(async () => {
  if (skip) return;
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN, JWT_SECRET, ROOM_SECRET } });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await sluice?.stop();
});

const from = (ip, path, headers = {}) =>
  sluice.fetch(path, { headers: { "CF-Connecting-IP": ip, ...headers } });

/** A page that records console errors, uncaught exceptions and dialogs;
 * `expected` lists console errors the test provokes on purpose. */
async function open({ width = 1280, height = 800, dark = false } = {}) {
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: dark ? "dark" : "light" }]);
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`exception: ${error.message}`));
  page.on("dialog", async (dialog) => {
    if (dialog.type() === "confirm") return dialog.accept();
    problems.push(`dialog: ${dialog.type()} ${dialog.message()}`);
    return dialog.dismiss();
  });
  await page.goto(`${sluice.base}/_sluice/admin/`, { waitUntil: "load" });
  return { page, problems };
}

async function signIn(page, token = TOKEN) {
  await page.waitForSelector("#token", { visible: true });
  await page.type("#token", token);
  await page.keyboard.press("Enter");
}

const text = (page, selector) => page.$eval(selector, (node) => node.textContent);
const texts = (page, selector) => page.$$eval(selector, (nodes) => nodes.map((node) => node.textContent));

/** Waits until `selector`'s rows hold a cell whose text is exactly `value`. */
function rowWith(page, selector, value) {
  return page.waitForFunction(
    (sel, v) => [...document.querySelectorAll(`${sel} td, ${sel} th, ${sel} .key, ${sel} .line`)].some((cell) => cell.textContent === v),
    { timeout: 15_000 },
    selector,
    value,
  );
}

describe("the dashboard", { skip }, () => {
  test("exists only with ADMIN_TOKEN, with strict headers, and holds no data", async () => {
    const page = await sluice.fetch("/_sluice/admin/");
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type"), /^text\/html/);
    const csp = page.headers.get("content-security-policy");
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self';/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(page.headers.get("x-content-type-options"), "nosniff");
    assert.equal(page.headers.get("referrer-policy"), "no-referrer");
    const html = await page.text();
    assert.doesNotMatch(html, /<script>|<style|\sstyle=|\son[a-z]+=/i, "no inline script, style or handler");
    assert.doesNotMatch(html, new RegExp(TOKEN));

    const script = await sluice.fetch("/_sluice/admin/dashboard.js");
    assert.equal(script.status, 200);
    assert.match(script.headers.get("content-type"), /javascript/);
    assert.equal(script.headers.get("x-content-type-options"), "nosniff");
    assert.equal((await sluice.fetch("/_sluice/admin/dashboard.css")).status, 200);
    assert.equal((await sluice.fetch("/_sluice/admin/dashboard.js", { method: "POST" })).status, 405);

    const home = await sluice.fetch("/_sluice/admin", { redirect: "manual" });
    assert.equal(home.status, 308);
    assert.equal(home.headers.get("location"), "/_sluice/admin/");

    assert.equal((await sluice.fetch("/_sluice/admin/rules")).status, 401);
    const rules = await sluice.fetch("/_sluice/admin/rules", { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(rules.status, 200);
    assert.equal(rules.headers.get("cache-control"), "no-store");
    assert.equal(rules.headers.get("x-content-type-options"), "nosniff");
    assert.equal(rules.headers.get("referrer-policy"), "no-referrer");
    const listed = await rules.json();
    assert.deepEqual(listed.rules.map((r) => r.id), ["api", "login", "search", "sale", "report", "tiers", "flash", "drop", "cart", "hall"]);
    assert.deepEqual([listed.rules[3].scope, listed.rules[3].split], ["global", 2]);

    // The assets are not reachable outside the admin path.
    const root = await sluice.fetch("/dashboard.js");
    assert.doesNotMatch(await root.text(), /uPlot|sluice-admin-token/);

    const bare = await Sluice.start({ sluice: config, secrets: { JWT_SECRET, ROOM_SECRET } });
    try {
      for (const path of ["/_sluice/admin/", "/_sluice/admin/dashboard.js", "/_sluice/admin"]) {
        assert.equal((await bare.fetch(path, { redirect: "manual" })).status, 404, path);
      }
    } finally {
      await bare.stop();
    }
  });

  test("a wrong token shows the error and nothing else", async () => {
    const { page, problems } = await open();
    await signIn(page, "not-the-token-0123456789-0123456789-abc");
    await page.waitForSelector("#signin-error", { visible: true });
    assert.match(await text(page, "#signin-error"), /refused this token \(401/);
    assert.equal(await page.$eval("#dashboard", (node) => node.hidden), true);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, "a refused token is not kept");
    assert.equal(await page.$eval("#token", (node) => document.activeElement === node), true);
    await page.screenshot({ path: join(SHOTS, "wrong-token.png") });
    // The one console error is the browser reporting the 401 itself.
    assert.deepEqual(problems.filter((p) => !/status of 401/.test(p)), []);
    await page.close();
  });

  test("shows rules, traffic, top refused keys and bans, and lifts a ban", async () => {
    // Traffic: api refuses 198.51.100.1 twice; login bans 198.51.100.2;
    // search refuses the hostile keys.
    for (let i = 0; i < 5; i += 1) await from("198.51.100.1", "/api/items");
    for (let i = 0; i < 4; i += 1) await from("198.51.100.2", "/login");
    for (const key of XSS) for (let i = 0; i < 3; i += 1) await from("198.51.100.3", "/search", { "x-user": key });
    assert.notEqual((await from("198.51.100.2", "/login")).status, 200, "the login key is banned");

    const { page, problems } = await open();
    const statsInFlight = { now: 0, most: 0 };
    page.on("request", (request) => {
      if (request.url().includes("/admin/stats")) {
        statsInFlight.now += 1;
        statsInFlight.most = Math.max(statsInFlight.most, statsInFlight.now);
      }
    });
    const settled = (request) => {
      if (request.url().includes("/admin/stats")) statsInFlight.now -= 1;
    };
    page.on("requestfinished", settled);
    page.on("requestfailed", settled);
    await signIn(page);

    // The rules as configured.
    await rowWith(page, "#rules", "api");
    const ruleRows = await page.$$eval("#rules tbody tr", (rows) => rows.map((row) => row.textContent));
    assert.equal(ruleRows.length, 10);
    assert.match(ruleRows[0], /\/api\/\*.*GET, POST.*\{ip\}.*3 \/ 1m · sliding_log.*per key.*enforcing.*deny \(fail closed\)/);
    assert.match(ruleRows[1], /after 2 in 1m.*for 10m ×2 up to 1h/);
    assert.match(ruleRows[2], /enforcing.*one object call per decision/);
    assert.doesNotMatch(ruleRows[0], /one object call per decision/);
    assert.match(ruleRows[3], /everyone \(shared\).*1,000 \/ 1s · fixed_window.*global, split 2/);
    assert.match(ruleRows[4], /2 at once.*allow \(fail open\)/);

    // The chart and its data, per minute.
    await page.waitForSelector('.rule-card[data-rule="api"] canvas');
    await rowWith(page, '.rule-card[data-rule="api"] .minute-table', "2");
    const minute = await page.$$eval('.rule-card[data-rule="api"] .minute-table tbody tr td', (cells) =>
      cells.slice(1, 4).map((cell) => cell.textContent));
    assert.deepEqual(minute, ["3", "2", "0"]);
    assert.match(await text(page, '.rule-card[data-rule="api"] .totals'), /3 admitted.*2 refused.*0 failed/);

    // Top refused keys, hostile ones shown as text and run nothing.
    await rowWith(page, '.rule-card[data-rule="api"] .top-refused', "198.51.100.1");
    for (const key of XSS) await rowWith(page, '.rule-card[data-rule="search"] .top-refused', key);
    assert.equal(await page.$$eval("#traffic img, #traffic script", (nodes) => nodes.length), 0);
    assert.equal(await page.$$eval('img[src="x"], body script', (nodes) => nodes.length), 0);

    // The ban the login rule started, and one set from the page.
    await rowWith(page, "#bans", "198.51.100.2");
    await page.type("#ban-key", "198.51.100.9");
    await page.$eval("#ban-for", (input) => { input.value = ""; });
    await page.type("#ban-for", "10m");
    await page.type("#ban-reason", XSS[0]);
    await page.click("#ban-form button[type=submit]");
    await rowWith(page, "#bans", "198.51.100.9");
    await rowWith(page, "#bans", XSS[0]);
    assert.notEqual((await from("198.51.100.9", "/api/x")).status, 200, "the manual ban holds");

    // An override set through the admin API shows in the lookup, as text.
    const override = await fetch(`${sluice.base}/_sluice/admin/keys/api/198.51.100.1/override`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ limit: 5, window: "1m", reason: XSS[1] }),
    });
    assert.equal(override.status, 200);

    // Key lookup: the api key's state per policy.
    await page.select("#lookup-rule", "api");
    await page.type("#lookup-key", "198.51.100.1");
    await page.click("#lookup-form button[type=submit]");
    await page.waitForSelector("#key-result .slots");
    assert.match(await text(page, "#key-result .slots tbody"), /^api5 \/ 1m32/, "the limit in force: the override's");
    assert.match(await text(page, "#key-result"), /Not banned\./);
    const overrideText = await text(page, "#key-result");
    assert.match(overrideText, /override ?api: 5 \/ 1m, until lifted/);
    assert.ok(overrideText.includes(XSS[1]), "the override's reason is shown as text");

    // The isolate's figures and the time of the last refresh.
    assert.match(await text(page, "#isolate"), /Refusal cache.*of 4,096.*Hubs answering16 of 16/);
    assert.notEqual(await text(page, "#refreshed"), "never");
    assert.equal(await text(page, "#status"), "Live");
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(SHOTS, "dashboard.png") });
    await page.screenshot({ path: join(SHOTS, "dashboard-full.png"), fullPage: true });

    // Lift both bans from the page: the keys are admitted again.
    for (const key of ["198.51.100.9", "198.51.100.2"]) {
      await page.click(`#bans button[aria-label="Lift the ban on ${key}"]`);
      await page.waitForFunction(
        (k) => ![...document.querySelectorAll("#bans .key")].some((cell) => cell.textContent === k),
        { timeout: 15_000 },
        key,
      );
    }
    assert.equal((await from("198.51.100.9", "/api/x")).status, 200);
    const unbanned = await from("198.51.100.2", "/login");
    assert.equal((await unbanned.json()).code, "quota-exceeded", "the rule's ban is lifted, its log kept");

    // Reset from the lookup (confirmed in a dialog) empties the key.
    await page.click("#key-result button.danger");
    await page.waitForFunction(() => /Nothing counted/.test(document.querySelector("#key-result").textContent));
    assert.equal((await from("198.51.100.1", "/api/items")).status, 200);

    assert.ok(statsInFlight.most <= 1, `at most one refresh in flight, saw ${statsInFlight.most}`);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("reads at phone width in the dark, and by keyboard", async () => {
    const { page, problems } = await open({ width: 390, height: 844, dark: true });
    assert.equal(await page.$eval("#token", (node) => node === document.activeElement), true, "the token field has focus");
    assert.equal(await page.$eval("#token", (node) => node.labels[0]?.textContent), "Admin token");
    await page.keyboard.type(TOKEN);
    await page.keyboard.press("Enter");
    await rowWith(page, "#rules", "api");
    await page.waitForSelector('.rule-card[data-rule="api"] canvas');
    await page.waitForSelector('.room-card canvas, [data-room] canvas');
    assert.equal(await page.evaluate(() => window.scrollY), 0, "it opens at the top, not scrolled to its main part");
    // The rules table scrolls sideways in its box, every column reachable.
    const reach = await page.$eval("#rules", (table) => {
      const box = table.parentElement;
      box.scrollLeft = box.scrollWidth;
      const last = table.tHead.rows[0].cells[table.tHead.rows[0].cells.length - 1].getBoundingClientRect();
      return { scrolls: box.scrollWidth > box.clientWidth, overflow: getComputedStyle(box).overflowX, lastRight: last.right, lastLeft: last.left };
    });
    assert.ok(reach.scrolls && reach.overflow === "auto", JSON.stringify(reach));
    assert.ok(reach.lastLeft >= 0 && reach.lastRight <= 390, `the last column is reached by scrolling: ${JSON.stringify(reach)}`);
    const room = await text(page, '#rules tr[data-rule="hall"]');
    assert.doesNotMatch(room, /per key|fail closed|object call/, "a room's row speaks of a room");
    const unlabeled = await page.$$eval("input, select", (fields) =>
      fields.filter((field) => field.labels.length === 0).map((field) => field.id));
    assert.deepEqual(unlabeled, []);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no sideways scrolling at 390 px (${overflow} px too wide)`);
    const background = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    assert.equal(background, "rgb(15, 20, 25)", "the dark scheme applies");

    // Keyboard: tab from the header reaches the controls in reading order.
    await page.focus("#refresh");
    const order = [];
    for (let i = 0; i < 5; i += 1) {
      await page.keyboard.press("Tab");
      order.push(await page.evaluate(() => document.activeElement.id || document.activeElement.textContent));
    }
    assert.deepEqual(order.slice(0, 2), ["pause", "signout"]);
    await page.screenshot({ path: join(SHOTS, "dashboard-phone-dark.png"), fullPage: true });

    // Signing out forgets the token.
    await page.click("#signout");
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("\"Ban…\" on a top refused key bans that key on that rule only", async () => {
    // An attacker sends a victim's address as its key on a header-keyed rule.
    const victim = "10.3.3.3";
    for (let i = 0; i < 3; i++) await from("198.51.100.66", "/search", { "x-user": victim });
    const { page, problems } = await open();
    const sent = [];
    page.on("request", (request) => {
      if (request.method() === "PUT") sent.push(new URL(request.url()).pathname);
    });
    await signIn(page);
    await rowWith(page, '.rule-card[data-rule="search"] .top-refused', victim);
    await page.click(`.rule-card[data-rule="search"] button[aria-label="Ban ${victim} on rule search"]`);
    await page.waitForSelector("#key-ban-form", { visible: true });
    assert.equal(await text(page, "#key-ban-subject"), `${victim} on rule search`);
    assert.equal(await page.$eval("#key-ban-for", (node) => node === document.activeElement), true);
    // Enter, not a click: a refresh may move the form while the pointer
    // is on its way.
    await page.type("#key-ban-reason", "key abuse");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#key-ban-form", { hidden: true });
    assert.deepEqual(sent, [`/_sluice/admin/keys/search/${victim}/ban`], "a ban of the key on its rule, nothing else");
    assert.equal((await from(victim, "/api/x")).status, 200, "the client at that address is not banned");
    const refused = await from("198.51.100.67", "/search", { "x-user": victim });
    assert.equal((await refused.json()).code, "banned", "the key is, on its rule");
    // The ban shows under the rule, and its Lift lifts it on that rule.
    await rowWith(page, "#bans", victim);
    await page.click(`#bans button[aria-label="Lift the ban on ${victim}"]`);
    await page.waitForFunction((k) => ![...document.querySelectorAll("#bans .key")].some((c) => c.textContent === k), { timeout: 15_000 }, victim);
    assert.notEqual((await (await from("198.51.100.68", "/search", { "x-user": victim })).json()).code, "banned");
    // Banning an address or a network is its own form.
    assert.match(await text(page, "#ban-form h3"), /address or a network on every rule/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("Inspect works for a tiered rule's keys and a split quota, which shows every part", async () => {
    for (let i = 0; i < 2; i++) await from("198.51.100.70", "/tiers", { "x-user": "free-user" });
    for (let i = 0; i < 3; i++) await from("198.51.100.71", "/flash");
    const { page, problems } = await open();
    const asked = [];
    page.on("request", (request) => {
      const path = new URL(request.url()).pathname;
      if (path.includes("/admin/keys/")) asked.push(decodeURIComponent(path));
    });
    await signIn(page);
    await rowWith(page, '.rule-card[data-rule="tiers"] .top-refused', "free-user");
    await page.click('.rule-card[data-rule="tiers"] button[aria-label="Inspect free-user"]');
    await page.waitForFunction(() => /Tier tiers\.free/.test(document.querySelector("#key-result").textContent), { timeout: 15_000 });
    assert.deepEqual(asked, ["/_sluice/admin/keys/tiers/free-user"]);
    const tiers = await text(page, "#key-result");
    assert.match(tiers, /Tier tiers\.pro.*Nothing counted.*Tier tiers\.free/s);
    assert.match(tiers, /tiers\.free1 \/ 1m10/, "the free tier's slot: limit 1, used 1");

    // A global quota's top refused keys are its clients: no Inspect (the
    // quota's key is *), and a ban of the address on every rule, through
    // its own form, which the operator still submits.
    await rowWith(page, '.rule-card[data-rule="flash"] .top-refused', "198.51.100.71");
    assert.equal(await page.$('.rule-card[data-rule="flash"] button[aria-label^="Inspect"]'), null);
    await page.click('.rule-card[data-rule="flash"] button[aria-label="Ban the address 198.51.100.71 on every rule"]');
    assert.equal(await page.$eval("#ban-key", (node) => node.value), "198.51.100.71");
    assert.equal(await page.$eval("#ban-for", (node) => node === document.activeElement), true);
    await page.$eval("#ban-key", (node) => { node.value = ""; });
    await page.select("#lookup-rule", "flash");
    await page.$eval("#lookup-key", (node) => { node.value = ""; });
    await page.type("#lookup-key", "*");
    await page.click("#lookup-form button[type=submit]");
    await page.waitForSelector("#key-result table.parts");
    assert.equal(asked.at(-1), "/_sluice/admin/keys/flash/*");
    assert.match(await text(page, "#key-result .slots tbody"), /^flash2 \/ 1m20/, "the whole quota: 2, used 2, none left");
    const parts = await page.$$eval("#key-result table.parts tbody tr", (rows) => rows.map((row) => row.textContent));
    assert.deepEqual(parts, ["*#0flash1 / 1m10", "*#1flash1 / 1m10"]);
    assert.match(await text(page, "#key-result .head"), /Reset every part/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("each rule's state changes from its buttons, and a global quota's sale and override are shown and set", async () => {
    for (let i = 0; i < 4; i += 1) assert.equal((await from(`198.51.100.${80 + i}`, "/drop")).status, 200);
    assert.equal((await sluice.fetch("/cart", { headers: { "x-user": "ann" } })).status, 200);
    const { page, problems } = await open();
    const dialogs = [];
    page.on("dialog", (dialog) => dialogs.push(dialog.message()));
    await signIn(page);
    // The sale: figures summed over the parts, a chart per second.
    await page.waitForSelector('.sale-card[data-sale="drop"] canvas');
    await page.waitForFunction(() => /Sold of drop4 of 10 \/ 1h/.test(document.querySelector('.sale-card[data-sale="drop"] .sale-figures')?.textContent ?? ""), { timeout: 15_000 });
    const figures = await text(page, '.sale-card[data-sale="drop"] .sale-figures');
    assert.match(figures, /Left of drop6 of 10 \/ 1h/);
    // The rate counts complete seconds: just after the traffic it may be 0.
    assert.match(figures, /Rate, last 10 s\d+\.\d \/ sSells out(in \d|not at this rate)/);
    assert.equal(await page.$$eval('.sale-card[data-sale="drop"] details.parts tbody tr', (rows) => rows.length), 2);
    // A global layer under a per-user limit has its own sale, by its policies' name.
    await page.waitForFunction(() => /Left of cart\.all9 of 10 \/ 1h/.test(document.querySelector('.sale-card[data-sale="cart.all"] .sale-figures')?.textContent ?? ""), { timeout: 15_000 });
    const stateOf = (rule) => page.$eval(`#rules tr[data-rule="${rule}"] .state-cell .tag`, (node) => node.textContent);
    const waitState = (rule, state) => page.waitForFunction(
      (r, s) => document.querySelector(`#rules tr[data-rule="${r}"] .state-cell .tag`)?.textContent === s,
      { timeout: 15_000 }, rule, state);
    assert.equal(await stateOf("api"), "open");
    assert.equal(await page.$eval('#rules button[aria-label="Open rule api"]', (node) => node.disabled), true);

    // Pause a per-key rule (KV) with a reason, close a global one (its
    // parts) after a confirmation: each applies from the next request.
    await page.type("#state-reason", "stock count");
    await page.click('#rules button[aria-label="Pause rule api"]');
    await waitState("api", "paused");
    assert.match(await text(page, '#rules tr[data-rule="api"] .state-cell'), /stock count/);
    assert.equal(await page.$eval("#state-reason", (node) => node.value), "", "the reason is for one change");
    const paused = await from("198.51.100.90", "/api/x");
    assert.deepEqual([paused.status, (await paused.json()).code], [503, "paused"]);
    await page.click('#rules button[aria-label="Close rule drop"]');
    await waitState("drop", "closed");
    assert.match(dialogs.at(-1), /Close rule drop\? Every request it matches is answered 410/);
    const closed = await from("198.51.100.91", "/drop");
    assert.deepEqual([closed.status, (await closed.json()).code], [410, "closed"]);
    await page.waitForFunction(() => document.querySelector('.sale-card[data-sale="drop"] header .tag')?.textContent === "closed", { timeout: 15_000 });
    // A per-user rule under a global layer: its state is its layer's parts'
    // (the layer's sale card shows it too).
    assert.match(await text(page, '#rules tr[data-rule="cart"]'), /also cart\.all: everyone \(shared\).*also cart\.all: 10 \/ 1h · sliding_log.*per keyalso cart\.all: global, split 2/);
    await page.click('#rules button[aria-label="Pause rule cart"]');
    await waitState("cart", "paused");
    await page.waitForFunction(() => document.querySelector('.sale-card[data-sale="cart.all"] header .tag')?.textContent === "paused", { timeout: 15_000 });
    const held = await sluice.fetch("/cart", { headers: { "x-user": "bob" } });
    assert.deepEqual([held.status, (await held.json()).code], [503, "paused"]);

    // The whole limit's override, set and lifted from the sale's card.
    await page.click('.sale-card[data-sale="drop"] details.override summary');
    await page.type("#override-limit-drop", "12");
    await page.type("#override-reason-drop", "more stock");
    await page.click('.sale-card[data-sale="drop"] .override-form button[type=submit]');
    await page.waitForFunction(() => /override drop: 12 \/ 1h \(more stock\)/.test(document.querySelector('.sale-card[data-sale="drop"]').textContent), { timeout: 15_000 });
    assert.match(await text(page, '.sale-card[data-sale="drop"] .sale-figures'), /Left of drop8 of 12/);
    await (await page.$('.sale-card[data-sale="drop"]')).screenshot({ path: join(SHOTS, "sale.png") });
    await (await page.$("#rules")).screenshot({ path: join(SHOTS, "rule-states.png") });

    // Open both again: admitted from the next request.
    for (const rule of ["api", "drop", "cart"]) {
      await page.click(`#rules button[aria-label="Open rule ${rule}"]`);
      await waitState(rule, "open");
    }
    assert.equal((await from("198.51.100.90", "/api/x")).status, 200);
    assert.equal((await from("198.51.100.91", "/drop")).status, 200);
    assert.equal((await sluice.fetch("/cart", { headers: { "x-user": "bob" } })).status, 200);
    await page.click('.sale-card[data-sale="drop"] .override-form button[type=button]');
    await page.waitForFunction(() => /No override/.test(document.querySelector('.sale-card[data-sale="drop"]').textContent), { timeout: 15_000 });
    assert.match(dialogs.at(-1), /Lift the override of drop\?/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("long keys and reasons wrap in every table: nothing is wider than the page", async () => {
    const long = `${"k".repeat(500)}-${"z".repeat(11)}`;
    const reason = "r".repeat(200);
    assert.equal(long.length, 512);
    for (let i = 0; i < 2; i++) await from("198.51.100.80", "/search", { "x-user": long });
    const put = await fetch(`${sluice.base}/_sluice/admin/bans/${encodeURIComponent(long)}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ for: "10m", reason }),
    });
    assert.equal(put.status, 200);
    const { page, problems } = await open({ width: 1280, height: 800 });
    await signIn(page);
    await rowWith(page, "#bans", long);
    await rowWith(page, '.rule-card[data-rule="search"] .top-refused', long);
    const fits = async (what) => {
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${what}: no sideways scrolling at 1280 px (${overflow} px too wide)`);
      const wide = await page.$$eval("table", (tables) =>
        tables.filter((t) => t.scrollWidth > t.parentElement.clientWidth + 1 && t.offsetParent !== null && !t.closest("details:not([open])")).map((t) => t.id || t.className));
      assert.deepEqual(wide, [], `${what}: no table is wider than its box`);
    };
    await fits("the lists");
    await page.click(`.rule-card[data-rule="search"] button[aria-label="Inspect ${long}"]`);
    await page.waitForSelector("#key-result .head");
    await page.screenshot({ path: join(SHOTS, "long-keys.png"), fullPage: true });
    await fits("the key's view");
    await page.click(`.rule-card[data-rule="search"] button[aria-label="Ban ${long} on rule search"]`);
    await page.waitForSelector("#key-ban-form", { visible: true });
    await fits("the key's ban form");
    await fetch(`${sluice.base}/_sluice/admin/bans/${encodeURIComponent(long)}`, { method: "DELETE", headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("shows the newest bans a page at a time, and their count", async () => {
    const adminCall = (method, path, body) => fetch(`${sluice.base}/_sluice/admin${path}`, {
      method,
      headers: { Authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body && JSON.stringify(body),
    });
    const keys = Array.from({ length: 30 }, (_, i) => `paged-${String(i).padStart(2, "0")}`);
    for (const key of keys) assert.equal((await adminCall("PUT", `/bans/${key}`, { for: "10m" })).status, 200);
    const total = (await (await adminCall("GET", "/stats")).json()).bans;
    const { page, problems } = await open();
    const asked = [];
    page.on("request", (request) => {
      const url = new URL(request.url());
      if (url.pathname.endsWith("/admin/bans")) asked.push(url.search);
    });
    await signIn(page);
    await rowWith(page, "#bans", keys[29]);
    assert.equal(await page.$$eval("#bans tbody tr", (rows) => rows.length), 25, "one page of 25");
    assert.equal(await text(page, "#bans-count"), `(${total.manual + total.rule})`);
    assert.match(await text(page, "#bans-more"), /Showing the newest 25/);
    assert.equal(await page.$eval("#bans .key", (cell) => cell.textContent), keys[29], "the newest first");
    await page.click("#bans-more-button");
    await page.waitForFunction(() => document.querySelectorAll("#bans tbody tr").length > 25, { timeout: 15_000 });
    assert.ok(asked.includes("?limit=25") && asked.includes("?limit=50"), asked.join(" "));
    for (const key of keys) await adminCall("DELETE", `/bans/${key}`);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test("says so when the admin API is unreachable, and recovers", async () => {
    const { page, problems } = await open();
    await signIn(page);
    await rowWith(page, "#rules", "api");
    await page.setOfflineMode(true);
    await page.click("#refresh");
    await page.waitForSelector("#problem", { visible: true });
    assert.match(await text(page, "#problem"), /unreachable.*Showing what it answered at/);
    assert.equal(await text(page, "#status"), "Unreachable");
    await page.screenshot({ path: join(SHOTS, "unreachable.png") });
    await page.setOfflineMode(false);
    await page.click("#refresh");
    await page.waitForSelector("#problem", { hidden: true });
    assert.equal(await text(page, "#status"), "Live");
    // Offline fetches are reported by the browser itself.
    assert.deepEqual(problems.filter((p) => !/ERR_INTERNET_DISCONNECTED/.test(p)), []);
    await page.close();
  });
});
