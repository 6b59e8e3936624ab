// A whole drop rehearsed through `npm run dev` (npm run sale): visitors,
// each with a cookie jar, join a waiting room before it opens (its
// pre-queue) and after, refresh as the waiting page says, some leave
// while waiting and some never end their session; those let in buy at a
// checkout limited to `--per-user` each under a stock that closes itself
// when sold out. It prints what an operator reads after a drop and fails
// (exit 1) if more or less than the stock was sold or anybody bought more
// than their limit. docs/flash-sale.md walks through it.
//
//   npm run sale [-- --visitors 300 --stock 100 --active 20 ...]
import { parseArgs } from "node:util";

export const DROP_OPTIONS = {
  visitors: { default: "300", help: "visitors, each with a cookie jar of its own" },
  stock: { default: "100", help: "what the drop has to sell (a global quota, sold_out = close)" },
  "per-user": { default: "1", help: "what one visitor may buy" },
  active: { default: "20", help: "the room's sessions at once" },
  shards: { default: "2", help: "the room's shards" },
  lead: { default: "30", help: "seconds from starting npm run dev to the opening; visitors who come before it wait in the pre-queue" },
  early: { default: "50", help: "percent of visitors who arrive before the opening" },
  leave: { default: "10", help: "percent who leave while waiting, and percent who never end their session" },
  "start-timeout": { default: "180", help: "seconds to wait for npm run dev to answer (it may build first)" },
};

/** The drop's options, or the usage asked for. */
export function dropOptions(args, usage) {
  const { values } = parseArgs({
    args,
    options: {
      ...Object.fromEntries(Object.entries(DROP_OPTIONS).map(([name, { default: d }]) => [name, { type: "string", default: d }])),
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    process.stdout.write(usage(DROP_OPTIONS, "npm run sale [-- options]"));
    process.exit(0);
  }
  const whole = (name, min, max = Infinity) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < min || value > max) throw new Error(`--${name}: ${values[name]} is not a whole number from ${min} to ${max}`);
    return value;
  };
  return {
    visitors: whole("visitors", 1),
    stock: whole("stock", 1),
    perUser: whole("per-user", 1),
    active: whole("active", 1),
    shards: whole("shards", 1),
    leadS: whole("lead", 5),
    early: whole("early", 0, 100) / 100,
    leave: whole("leave", 0, 50) / 100,
    startTimeoutS: whole("start-timeout", 1),
  };
}

/** The drop's rules: the checkout behind the room (`room = "shop"`: only
 * a visitor the room let in reaches it), then the room on the shop's
 * pages. Every visitor comes from this machine's address, so the room's
 * join limit counts them by their `x-user`, as a shop whose shoppers sign
 * in would. `opensAt` leaves time for npm run dev to start. */
export function dropConfig(o, opensAt) {
  return {
    prefix: "/_sluice",
    origin: "demo",
    rules: [
      {
        id: "checkout",
        match: { path: "/shop/checkout", methods: ["POST"] },
        room: "shop",
        key: "header:x-user",
        limit: o.perUser,
        window: "1h",
        also: [{ id: "stock", scope: "global", split: 4, limit: o.stock, window: "30d", sold_out: "close" }],
      },
      {
        id: "shop",
        match: { path: "/shop/*" },
        waiting_room: {
          active: o.active,
          per_minute: 100_000,
          shards: o.shards,
          refresh: "1s",
          session: "10s",
          opens_at: new Date(opensAt).toISOString(),
          join: { key: "header:x-user", limit: 5, window: "1m" },
        },
      },
    ],
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** One visitor: a cookie jar of the room's cookie, and what happened. */
class Visitor {
  constructor(base, id) {
    this.base = base;
    this.id = id;
    this.cookie = null;
    this.log = { id, waits: [] };
  }

  async request(path, init = {}) {
    const headers = { accept: "application/json", "x-user": this.id, ...(this.cookie ? { cookie: this.cookie } : {}) };
    const response = await fetch(this.base + path, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";").map((s) => s.trim());
      this.cookie = attributes.some((a) => a.toLowerCase() === "max-age=0") ? null : pair;
    }
    const text = await response.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: response.status, body };
  }

  /** Arrives at `at`, waits its turn (refreshing as told), leaves early
   * when `leaves`, buys once let in, and ends its session unless `stays`. */
  async visit(at, { leaves, stays }) {
    await sleep(at - Date.now());
    this.log.arrived = Date.now();
    for (let refreshes = 0; ; refreshes += 1) {
      const page = await this.request("/shop/drop");
      if (page.status === 200) break;
      if (page.status !== 503 || !page.body) {
        this.log.room = `${page.status}`;
        return this.log;
      }
      this.log.waits.push({ at: Date.now(), ...page.body });
      if (leaves && page.body.state === "waiting" && refreshes >= 2) {
        this.log.left = true;
        return this.log;
      }
      await sleep((page.body.refresh_s ?? 1) * 1000);
    }
    this.log.in = Date.now();
    // "Buy", pressed twice at once; a `pending` answer is tried again
    // after its Retry-After.
    const buy = async () => {
      for (let tries = 0; ; tries += 1) {
        const answer = await this.request("/shop/checkout", { method: "POST" });
        const layer = answer.body?.["violated-policies"]?.join(", ");
        const outcome = answer.status === 200 ? "sold" : `${answer.status} ${answer.body?.code ?? ""}${layer ? ` (${layer})` : ""}`;
        if (answer.body?.code !== "pending" || tries === 2) return outcome;
        await sleep(1000);
      }
    };
    this.log.checkout = await Promise.all([buy(), buy()]);
    this.log.stayed = stays;
    if (!stays) await this.request("/shop/done?room=end");
    return this.log;
  }
}

/** Runs the visits against `base`; answers each visitor's log. */
export async function rehearse(o, base, opensAt) {
  const span = opensAt - Date.now();
  const visits = Array.from({ length: o.visitors }, (_, i) => {
    const early = i < Math.round(o.visitors * o.early);
    // Early visitors arrive over the time before the opening; the others
    // over as long again after it, in order of their number.
    const at = early ? opensAt - span + (span * (i + 0.5)) / (o.visitors * o.early) : opensAt + 200 + i * 10;
    // One in every `1 / leave` leaves while waiting, and the next one never
    // ends its session.
    const every = o.leave > 0 ? Math.round(1 / o.leave) : 0;
    const leaves = every > 0 && i % every === 1;
    const stays = every > 0 && i % every === 2;
    return new Visitor(base, `visitor-${i}`).visit(at, { leaves, stays });
  });
  // And a few who go straight to checkout as it opens, never through the
  // room's pages: the room is full then (the pre-queue is drawn into it),
  // so none of them may buy.
  const straight = Array.from({ length: 5 }, async (_, i) => {
    await sleep(opensAt + 100 - Date.now());
    const answer = await new Visitor(base, `straight-${i}`).request("/shop/checkout", { method: "POST" });
    return { id: `straight-${i}`, straight: answer.status, waits: [] };
  });
  return Promise.all([...visits, ...straight]);
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : NaN;
};

/** Pairs admitted in the other order than they arrived in, of all pairs. */
function inversions(visitors) {
  let swapped = 0;
  let pairs = 0;
  for (let i = 0; i < visitors.length; i += 1) {
    for (let j = i + 1; j < visitors.length; j += 1) {
      pairs += 1;
      if (visitors[i].in > visitors[j].in) swapped += 1;
    }
  }
  return { swapped, pairs };
}

/** The summary, one `name: value` a line, and what failed. */
export function summary(o, logs, sold, opensAt) {
  const buyers = new Map();
  const refusals = new Map();
  for (const log of logs) {
    for (const outcome of log.checkout ?? []) {
      if (outcome === "sold") buyers.set(log.id, (buyers.get(log.id) ?? 0) + 1);
      else refusals.set(outcome, (refusals.get(outcome) ?? 0) + 1);
    }
  }
  const answered = [...buyers.values()].reduce((a, b) => a + b, 0);
  const room = logs.filter((l) => l.room);
  const early = logs.filter((l) => l.in && l.arrived < opensAt);
  const late = logs.filter((l) => l.in && l.arrived >= opensAt).sort((a, b) => a.arrived - b.arrived);
  const lateOrder = inversions(late);
  // The first wait estimate each visitor was shown in line after the
  // opening, against the time it then took to get in.
  const estimates = logs.flatMap((l) => {
    const first = l.waits.find((w) => w.state === "waiting");
    return l.in && first ? [{ said: first.wait_s, took: (l.in - first.at) / 1000 }] : [];
  });
  const errors = estimates.map((e) => e.took - e.said);
  const fmt = (n, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "–");
  const lines = [
    `drop: ${o.visitors} visitors (${Math.round(o.early * 100)}% before the opening), stock ${o.stock}, ${o.perUser} per visitor, a room of ${o.active} in ${o.shards} shards, through npm run dev`,
    `sold: ${answered}`,
    `sold, by the stock's parts: ${sold}`,
    `distinct buyers: ${buyers.size}`,
    `buyers who bought more than ${o.perUser}: ${[...buyers.values()].filter((n) => n > o.perUser).length}`,
    `let in: ${logs.filter((l) => l.in).length} (${early.length} from the pre-queue, drawn at the opening; ${late.length} who came after)`,
    `left while waiting: ${logs.filter((l) => l.left).length}`,
    `let in and never ended their session: ${logs.filter((l) => l.stayed).length}`,
    `order of those who came after the opening: ${lateOrder.swapped} of ${lateOrder.pairs} pairs let in out of arrival order (${fmt((100 * lateOrder.swapped) / Math.max(1, lateOrder.pairs))}%)`,
    `wait estimates (each visitor's first in line): ${estimates.length}; median estimate ${fmt(median(estimates.map((e) => e.said)))} s, median actual ${fmt(median(estimates.map((e) => e.took)))} s, median actual - estimate ${fmt(median(errors))} s`,
    `refusals at checkout (each visitor pressed "buy" twice at once): ${[...refusals].map(([reason, n]) => `${reason}: ${n}`).join(", ") || "none"}`,
    `room answers other than waiting or in: ${room.length}`,
    `straight to checkout without the room: ${logs.filter((l) => l.straight).length}, answered ${[...new Set(logs.filter((l) => l.straight).map((l) => l.straight))].join(", ")}, none sold`,
  ];
  const failures = [];
  if (sold !== o.stock && o.visitors * o.perUser >= o.stock) failures.push(`the stock's parts sold ${sold}, not the stock ${o.stock}`);
  if (answered > sold) failures.push(`visitors were told ${answered} sales, the stock's parts hold ${sold}`);
  if ([...buyers.values()].some((n) => n > o.perUser)) failures.push(`somebody bought more than ${o.perUser}`);
  if (logs.some((l) => l.straight === 200)) failures.push("a request straight to checkout, without the room, bought");
  return { lines, failures };
}
