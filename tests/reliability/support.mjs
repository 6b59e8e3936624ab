// Helpers for the reliability suite.
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";

/** Whether to run the long version (npm run test:reliability). */
export const FULL = process.env.SLUICE_FULL === "1";

const RUNTIME = new URL("./runtime.mjs", import.meta.url).pathname;

/** The child's control channel: fd 3, a pipe of its own. Its stdout and
 * stderr belong to the tools it runs (wrangler, Miniflare, workerd), which
 * print what they like there (wrangler announces a .dev.vars on stdout, for
 * one); both go to our stderr, where a person sees them and nothing parses
 * them. */
export const CONTROL_FD = 3;

/** Starts runtime.mjs (or a stand-in `script` with the same protocol) on
 * `dir`; resolves to {url, kill()} once it serves. The child writes one line
 * on fd 3, `{"url": "http://..."}`, and nothing else; anything else there,
 * or an exit before that line, fails with a message that says which. */
export async function runtime(dir, options = {}, script = RUNTIME) {
  const child = spawn(process.execPath, [script, dir, JSON.stringify(options)], {
    detached: true,
    stdio: ["ignore", 2, 2, "pipe"],
    env: { ...process.env, SLUICE_CONTROL_FD: String(CONTROL_FD) },
  });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch (error) {
      if (error.code !== "ESRCH") throw error;
    }
    await exited;
  };
  const control = child.stdio[CONTROL_FD];
  let buffered = "";
  for await (const chunk of control) {
    buffered += chunk;
    if (!buffered.includes("\n") && buffered.length < 4096) continue;
    const line = buffered.split("\n")[0];
    let url;
    try {
      ({ url } = JSON.parse(line));
    } catch {
      url = undefined;
    }
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
      await kill();
      throw new Error(
        `${script} broke the control protocol on fd ${CONTROL_FD}: expected one line {"url": "http://..."}, ` +
          `got ${JSON.stringify(line.slice(0, 200))}. Tool output belongs on stdout or stderr, never on fd ${CONTROL_FD}.`,
      );
    }
    control.resume();
    return { url, kill };
  }
  const { code, signal } = await exited;
  throw new Error(
    `${script} exited (${signal ? `signal ${signal}` : `code ${code}`}) before it served: ` +
      `no {"url": ...} line on fd ${CONTROL_FD}${buffered ? `, only ${JSON.stringify(buffered.slice(0, 200))}` : ""}; its output is above, on stderr`,
  );
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
