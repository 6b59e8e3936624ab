// The baseline: the same exact sliding log as Sluice's key object, written as
// a plain JavaScript Durable Object on the same runtime. It answers the
// decision API (POST /_sluice/v1/limit {key, limit, window_ms}) with one
// object per key, keeps the log in memory and every admission in SQLite,
// and writes nothing for a refusal, as the Rust key object does.
export class JsLimiter {
  constructor(ctx) {
    this.ctx = ctx;
    this.sql = ctx.storage.sql;
    this.log = [];
    this.head = 0;
    this.tables = false;
    ctx.blockConcurrencyWhile(async () => {
      const found = this.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'hits'").one().n > 0;
      if (found) {
        this.tables = true;
        this.log = this.sql.exec("SELECT at FROM hits ORDER BY at").toArray().map((row) => row.at);
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
        this.sql.exec("CREATE TABLE IF NOT EXISTS hits (at INTEGER NOT NULL)");
        this.tables = true;
      }
      this.sql.exec("INSERT INTO hits (at) VALUES (?)", now);
      const first = this.log[this.head];
      return Response.json({ allowed: true, limit, remaining: limit - held - 1, reset_ms: first + window - now, retry_after_ms: 0 });
    }
    const wait = oldest + window - now;
    return Response.json({ allowed: false, limit, remaining: 0, reset_ms: wait, retry_after_ms: wait });
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
