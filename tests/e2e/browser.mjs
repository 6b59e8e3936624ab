// What the Chromium tests share: where the browser is, why a test is
// skipped without it, where screenshots go, and how it is started.
import { existsSync, mkdirSync } from "node:fs";
import puppeteer from "puppeteer-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Where the tests write their screenshots (docs/ holds the chosen ones). */
export const SHOTS = new URL("../../build/screenshots/", import.meta.url).pathname;

/** `false` when Chromium is installed, else why the browser tests skip. */
export const skip = existsSync(CHROMIUM)
  ? false
  : `no Chromium at ${CHROMIUM}: run scripts/setup.sh as root, or apt-get install -y chromium (or set CHROMIUM_PATH)`;

/** Headless Chromium, with the screenshots' folder made. */
export function launch() {
  mkdirSync(SHOTS, { recursive: true });
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}
