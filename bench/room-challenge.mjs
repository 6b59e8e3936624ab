// How long a waiting room's challenge takes a browser: headless Chromium
// (Debian's `chromium`, through puppeteer-core), its CPU slowed by the
// DevTools protocol's Emulation.setCPUThrottlingRate as a slower phone's
// would be, solving the page's own script in a fresh context per trial.
// A trial's time runs from the challenge page's answer to the request its
// script makes with the answer: parsing, the search, the reload.
//   node bench/room-challenge.mjs [trials] [bits...]   (default: 25, the default bits)
// Prints a Markdown table for BENCHMARKS.md, and writes a screenshot of
// the page to build/screenshots/room-challenge.png.
import { join } from "node:path";
import { launch, SHOTS } from "../tests/e2e/browser.mjs";
import { Sluice } from "../tests/e2e/harness.mjs";

const TRIALS = Number(process.argv[2] ?? 25);
const DEFAULT_BITS = 18;
const BITS = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [DEFAULT_BITS];
const RATES = [1, 4];

const sluice = await Sluice.start({
  sluice: {
    rules: [
      ...BITS.map((bits) => ({
        id: `w${bits}`, match: { path: `/w${bits}/*` },
        waiting_room: { active: 1_000, per_minute: 100_000, shards: 1, session: "1h", challenge: { work: bits }, join: { limit: 1_000 } },
      })),
      { id: "still", match: { path: "/still/*" }, waiting_room: { active: 1, per_minute: 1, shards: 1, challenge: { work: 28 } } },
    ],
  },
  secrets: { ROOM_SECRET: "room-secret-for-the-challenge-bench-0123" },
});
const browser = await launch();

/** One solve: ms from the challenge's answer to the request with the answer. */
async function solve(path, rate) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const cdp = await page.createCDPSession();
  await cdp.send("Emulation.setCPUThrottlingRate", { rate });
  let answered = null;
  const solved = new Promise((resolve) => {
    page.on("response", (response) => {
      if (response.request().isNavigationRequest() && response.status() === 503) answered ??= performance.now();
    });
    // The navigation after the challenge's answer is its script's.
    page.on("request", (request) => {
      if (request.isNavigationRequest() && answered !== null) resolve(performance.now());
    });
  });
  page.goto(`${sluice.base}${path}`, { timeout: 0 }).catch(() => {});
  const at = await solved;
  await context.close();
  return at - answered;
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const rows = [];
for (const bits of BITS) {
  for (const rate of RATES) {
    const times = [];
    for (let i = 0; i < TRIALS; i++) times.push(await solve(`/w${bits}/item`, rate));
    const mean = times.reduce((a, b) => a + b, 0) / times.length;
    rows.push(`| ${bits} | ${rate}× | ${TRIALS} | ${(quantile(times, 0.5) / 1000).toFixed(2)} s | ${(mean / 1000).toFixed(2)} s | ${(quantile(times, 0.9) / 1000).toFixed(2)} s | ${(Math.max(...times) / 1000).toFixed(2)} s |`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
}

// The page as a visitor sees it while its browser works (28 bits: minutes).
const page = await (await browser.createBrowserContext()).newPage();
await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
page.goto(`${sluice.base}/still/item`, { timeout: 0 }).catch(() => {});
await page.waitForSelector("#work");
await page.screenshot({ path: join(SHOTS, "room-challenge.png") });

console.log("| bits | CPU | trials | median | mean | p90 | max |");
console.log("|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
await browser.close();
await sluice.stop();
