// Where a new key's time goes: a CPU profile of the runtime while wrk sends
// a new key per request to the decision API, taken through workerd's
// inspector (the DevTools protocol's Profiler) and summed per request:
// the time under each kind of frame, then the functions with the most
// time of their own. Build with names kept, or wasm frames are numbers:
//   CARGO_PROFILE_RELEASE_STRIP=false bash scripts/build.sh
//   taskset -c 0 node bench/profile-new-keys.mjs            (Sluice, build/)
//   PROFILE_BASELINE=1 taskset -c 0 node bench/profile-new-keys.mjs   (the JavaScript baseline)
// PROFILE_SCRIPT (many-keys.lua) is the wrk script in bench/: hot-key.lua
// profiles one hot key. PROFILE_SECONDS (6) is how long it samples, after
// 2 s of warm-up;
// PROFILE_OUT, if set, is where the raw .cpuprofile goes (DevTools opens it).
// A native call's own time includes what the runtime does inside it: a
// stub's fetch() is where a new object and its SQLite database are made.
import { Miniflare } from "miniflare";
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { writeFileSync } from "node:fs";
import WebSocket from "ws";
import { API_TOKEN, sluiceWorkerOptions } from "../tests/e2e/harness.mjs";
import { baselineWorker } from "./baseline.mjs";

const here = new URL("./", import.meta.url).pathname;
const SECONDS = Number(process.env.PROFILE_SECONDS ?? 6);
const INSPECTOR_PORT = 9239;

// Without the dashboard's assets, whose router would sit in front of every
// request (bench/workerd.mjs says why).
const { assets, ...sluice } = sluiceWorkerOptions({ API_TOKEN, SLUICE: { origin: "demo", rules: [] } });
const worker = process.env.PROFILE_BASELINE === "1" ? baselineWorker({ compatibilityDate: sluice.compatibilityDate }) : sluice;
const mf = new Miniflare({ workers: [{ ...worker, unsafeInspectorProxy: true }], inspectorPort: INSPECTOR_PORT, host: "127.0.0.1", port: 0 });
const url = `${(await mf.ready).toString().replace(/\/$/, "")}/_sluice/v1/limit`;

const [target] = await (await fetch(`http://127.0.0.1:${INSPECTOR_PORT}/json`)).json();
const inspector = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((resolve) => inspector.once("open", resolve));
let lastId = 0;
const replies = new Map();
inspector.on("message", (message) => {
  const reply = JSON.parse(message);
  replies.get(reply.id)?.(reply);
  replies.delete(reply.id);
});
const send = (method, params = {}) =>
  new Promise((resolve) => {
    lastId += 1;
    replies.set(lastId, resolve);
    inspector.send(JSON.stringify({ id: lastId, method, params }));
  });

/** wrk with a new key per request; answers how many requests it sent. */
function newKeys(seconds, label) {
  const pinned = availableParallelism() > 1 ? ["taskset", "-c", "1", "wrk"] : ["wrk"];
  const args = ["-t1", "-c32", `-d${seconds}s`, "-H", `Authorization: Bearer ${API_TOKEN}`, "-s", here + (process.env.PROFILE_SCRIPT ?? "many-keys.lua"), url, "--", `${label}-${process.pid}`];
  const out = execFileSync(pinned[0], [...pinned.slice(1), ...args], { encoding: "utf8" });
  const non2xx = Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
  if (non2xx > 0) throw new Error(`${non2xx} non-2xx answers`);
  return Number(out.match(/(\d+) requests in/)[1]);
}

newKeys(2, "warm");
await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: 200 });
await send("Profiler.start");
const requests = newKeys(SECONDS, "profile");
const { result } = await send("Profiler.stop");
inspector.close();
await mf.dispose();
const profile = result.profile;
if (process.env.PROFILE_OUT) writeFileSync(process.env.PROFILE_OUT, JSON.stringify(profile));

// Each sample's stack, leaf first, as function names.
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parents = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
const stack = (id) => {
  const frames = [];
  for (let at = id; at !== undefined; at = parents.get(at)) frames.push(nodes.get(at).callFrame);
  return frames;
};
// The first kind whose pattern matches a frame of the stack takes the sample.
const KINDS = [
  ["runtime idle", /^\(idle\)$/],
  ["garbage collection", /^\(garbage collector\)$/],
  ["object: SQL statements", /^__wbg_exec_|^exec$/],
  ["object: setAlarm", /setAlarm/],
  ["object: the rest of Limiter", /sluice::edge::limiter::/],
  ["stub fetch(), native (makes a new object and its database)", /^fetch$/],
  ["worker: the call to the object (client.rs)", /sluice::edge::client::/],
  ["worker: gate, endpoints, answer", /sluice::edge::|sluice::http::/],
  ["glue: worker::Request from the runtime's (method, url, headers, cf)", /worker::request::Request as core::convert::From/],
  ["glue: worker::Response to the runtime's", /From<worker::response::Response> for web_sys/],
];
const perRequest = (us) => `${(us / 1000 / requests).toFixed(3)} ms`;
const kinds = new Map();
const own = new Map();
let total = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  total += dt;
  const frames = stack(id);
  const kind = KINDS.find(([, pattern]) => frames.some((f) => pattern.test(f.functionName)))?.[0] ?? "other (unnamed glue, microtasks, (program))";
  kinds.set(kind, (kinds.get(kind) ?? 0) + dt);
  const leaf = `${frames[0].functionName.replace(/::h[0-9a-f]{16}$/, "") || "(anonymous)"}`;
  own.set(leaf, (own.get(leaf) ?? 0) + dt);
});
const sorted = (map) => [...map].sort((a, b) => b[1] - a[1]);
const lines = [`${worker.name}: ${requests} new keys in ${SECONDS} s; ${perRequest(total)} of samples per request`, "", "| kind of frame | per request |", "|---|---|"];
for (const [kind, us] of sorted(kinds)) lines.push(`| ${kind} | ${perRequest(us)} |`);
lines.push("", "| function (own time) | per request |", "|---|---|");
for (const [name, us] of sorted(own).slice(0, 25)) lines.push(`| \`${name.slice(0, 100)}\` | ${perRequest(us)} |`);
// stderr: stdout belongs to Miniflare and workerd.
process.stderr.write(`${lines.join("\n")}\n`);
