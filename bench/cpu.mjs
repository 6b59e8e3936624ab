// The CPU time the runtime spends, read from /proc (Linux only): on a
// machine shared with other work, requests per second swing several-fold
// between rounds, while CPU time per request swings much less, because
// time a runtime spends waiting for a core is not counted.
import { readFileSync, readdirSync } from "node:fs";

const TICKS_PER_S = 100;

/** The pids of the workerd processes this script started (Miniflare runs
 * each as a child of this process; other workerds on the machine are not
 * ours to count). */
export function workerds() {
  return readdirSync("/proc")
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        const parent = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
        return parent === process.pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("workerd");
      } catch {
        return false;
      }
    });
}

/** CPU time (user + system) of the processes, in ms. */
export function cpuMs(pids) {
  return pids.reduce((sum, pid) => {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return sum + ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_S;
  }, 0);
}

/** Runs `start`, which starts one runtime, and answers what it answers with
 * the pids of the workerd processes that appeared meanwhile. */
export async function tracked(start) {
  const before = new Set(workerds());
  const runtime = await start();
  return Object.assign(runtime, { pids: workerds().filter((pid) => !before.has(pid)) });
}
