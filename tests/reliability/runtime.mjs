// A Sluice runtime in its own process group, so a test can kill it the hard
// way (SIGKILL to the group takes Node and workerd down at once, mid-write)
// and start it again on the same persisted state.
//   node runtime.mjs <persist-dir> <options-json>
// prints {"url": ...} on its first line once it serves requests.
import { Sluice } from "../e2e/harness.mjs";

const [dir, options = "{}"] = process.argv.slice(2);
const sluice = await Sluice.start({ ...JSON.parse(options), persist: dir });
process.stdout.write(`${JSON.stringify({ url: sluice.base })}\n`);
setInterval(() => {}, 1 << 30);
