// A Sluice runtime in its own process group, so a test can kill it the hard
// way (SIGKILL to the group takes Node and workerd down at once, mid-write)
// and start it again on the same persisted state.
//   started by support.mjs runtime(): node runtime.mjs <persist-dir> <options-json>
// Once it serves requests it writes one line, {"url": ...}, on fd 3, its
// control channel, and nothing else there. stdout and stderr are left to the
// tools it runs (wrangler, Miniflare, workerd), which print what they like.
import { fstatSync, writeSync } from "node:fs";
import { Sluice } from "../e2e/harness.mjs";

const CONTROL = Number(process.env.SLUICE_CONTROL_FD);
const open = (() => {
  try {
    const stat = fstatSync(CONTROL);
    return stat.isSocket() || stat.isFIFO();
  } catch {
    return false;
  }
})();
if (CONTROL !== 3 || !open) {
  process.stderr.write(
    "runtime.mjs: no control channel: start it through runtime() in tests/reliability/support.mjs, " +
      "which opens fd 3 as a pipe and sets SLUICE_CONTROL_FD=3; it reports its URL there, never on stdout\n",
  );
  process.exit(2);
}

const [dir, options = "{}"] = process.argv.slice(2);
const sluice = await Sluice.start({ ...JSON.parse(options), persist: dir });
writeSync(CONTROL, `${JSON.stringify({ url: sluice.base })}\n`);
setInterval(() => {}, 1 << 30);
