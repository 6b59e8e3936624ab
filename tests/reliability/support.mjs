// Helpers for the reliability suite.
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { promisify } from "node:util";

/** Whether to run the long version (npm run test:reliability). */
export const FULL = process.env.SLUICE_FULL === "1";

/** Starts runtime.mjs on `dir`; resolves to {url, kill()} once it serves. */
export async function runtime(dir, options = {}) {
  const child = spawn(process.execPath, [new URL("./runtime.mjs", import.meta.url).pathname, dir, JSON.stringify(options)], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let buffered = "";
  for await (const chunk of child.stdout) {
    buffered += chunk;
    const line = buffered.split("\n")[0];
    if (buffered.includes("\n")) {
      const { url } = JSON.parse(line);
      child.stdout.resume();
      return {
        url,
        /** SIGKILL to the whole group; a second call does nothing. */
        async kill() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, "exit");
          process.kill(-child.pid, "SIGKILL");
          await exited;
        },
      };
    }
  }
  throw new Error("the runtime exited before serving");
}

/** Durable Object databases under `dir` that still hold any table.
 * Asynchronous on purpose: scanning 100 000 databases takes over a minute,
 * and a synchronous scan would block the event loop so long that fetch
 * reuses keep-alive sockets workerd has closed meanwhile (EPIPE). */
export async function objectsHoldingData(dir, className) {
  const script = `
import sqlite3, sys, pathlib
held = 0
for path in pathlib.Path(sys.argv[1]).glob(f"*-{sys.argv[2]}/*.sqlite"):
    if path.name == "metadata.sqlite":
        continue
    # A database the runtime is writing may not open read-only (its WAL
    # needs recovery); count it as holding data, and the caller asks again.
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\\\_%' ESCAPE '\\\\'").fetchone()[0]
        db.close()
    except sqlite3.Error:
        tables = 1
    held += 1 if tables else 0
print(held)`;
  const { stdout } = await promisify(execFile)("python3", ["-c", script, dir, className]);
  return Number(stdout.trim());
}
