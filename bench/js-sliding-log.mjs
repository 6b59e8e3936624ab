// The baseline: the same exact sliding log as Sluice's key object, written as
// a plain JavaScript Durable Object on the same runtime. It answers the
// decision API (POST /_sluice/v1/limit {key, limit, window_ms}) with one
// object per key, keeps the log in memory and every admission in SQLite,
// and writes nothing for a refusal, as the Rust key object does.
//
// As committed it never frees a key's storage: every key it has seen keeps
// its rows forever. With the binding SWEEP set it also does what Sluice's
// key object does for that (DESIGN.md: an idle key costs 0 bytes): one
// alarm set with a key's first admission, which deletes what expired and
// frees the storage once nothing is left. `npm run bench` runs both.
export class JsLimiter {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.sql = ctx.storage.sql;
    this.sweep = Boolean(env.SWEEP);
    this.log = [];
    this.head = 0;
    this.window = 0;
    this.armed = false;
    this.tables = false;
    ctx.blockConcurrencyWhile(async () => {
      const found = this.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'hits'").one().n > 0;
      if (found) {
        this.tables = true;
        const rows = this.sql.exec(`SELECT ${this.sweep ? "at, window" : "at"} FROM hits ORDER BY at`).toArray();
        this.log = rows.map((row) => row.at);
        this.window = rows.at(-1)?.window ?? 0;
      }
    });
  }

  async fetch(request) {
    const { limit, window_ms: window } = await request.json();
    const now = Date.now();
    while (this.head < this.log.length && this.log[this.head] + window <= now) this.head += 1;
    if (this.head > 1024 && this.head * 2 > this.log.length) {
      this.log = this.log.slice(this.head);
      this.head = 0;
    }
    const held = this.log.length - this.head;
    const oldest = this.log[this.head];
    if (held < limit) {
      this.log.push(now);
      if (!this.tables) {
        this.sql.exec(`CREATE TABLE IF NOT EXISTS hits (at INTEGER NOT NULL${this.sweep ? ", window INTEGER NOT NULL" : ""})`);
        this.tables = true;
      }
      if (this.sweep) {
        // The window goes with each row, so that a restarted object's alarm
        // knows what has expired before any request tells it.
        this.sql.exec("INSERT INTO hits (at, window) VALUES (?, ?)", now, window);
        this.window = window;
        if (!this.armed) {
          this.ctx.storage.setAlarm(this.log[this.head] + window);
          this.armed = true;
        }
      } else {
        this.sql.exec("INSERT INTO hits (at) VALUES (?)", now);
      }
      const first = this.log[this.head];
      return Response.json({ allowed: true, limit, remaining: limit - held - 1, reset_ms: first + window - now, retry_after_ms: 0 });
    }
    const wait = oldest + window - now;
    return Response.json({ allowed: false, limit, remaining: 0, reset_ms: wait, retry_after_ms: wait });
  }

  async alarm() {
    const now = Date.now();
    this.log = this.log.slice(this.head).filter((at) => at + this.window > now);
    this.head = 0;
    if (this.log.length === 0) {
      await this.ctx.storage.deleteAll();
      this.tables = false;
      this.armed = false;
      return;
    }
    this.sql.exec("DELETE FROM hits WHERE at <= ?", now - this.window);
    this.ctx.storage.setAlarm(this.log[0] + this.window);
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method !== "POST" || url.pathname !== "/_sluice/v1/limit") {
      return new Response("not found", { status: 404 });
    }
    const body = await request.text();
    let ask;
    try {
      ask = JSON.parse(body);
    } catch {
      return new Response("bad json", { status: 400 });
    }
    const { key, limit, window_ms: window } = ask ?? {};
    if (typeof key !== "string" || key === "" || !Number.isInteger(limit) || limit < 1 || !Number.isInteger(window) || window < 1) {
      return new Response("bad request", { status: 400 });
    }
    const stub = env.LIMITER.get(env.LIMITER.idFromName(`api:${key}`));
    return stub.fetch("https://limiter/check", { method: "POST", body });
  },
};
