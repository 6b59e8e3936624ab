// The object bench/sql-statements.mjs runs: 20 000 statements of one form
// in one request, answering the µs per statement.
import { DurableObject } from "cloudflare:workers";

const N = 20000;
const T0 = 1700000000000;
const WITHOUT_ROWID = "CREATE TABLE IF NOT EXISTS t (policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (policy, at)) WITHOUT ROWID";
const FORMS = {
  upsert_without_rowid: [WITHOUT_ROWID, (sql, i) => sql.exec("INSERT INTO t (policy, at, n) VALUES (?, ?, ?) ON CONFLICT (policy, at) DO UPDATE SET n = n + excluded.n", "api", T0 + i, 1)],
  insert_without_rowid: [WITHOUT_ROWID, (sql, i) => sql.exec("INSERT INTO t (policy, at, n) VALUES (?, ?, ?)", "api", T0 + i, 1)],
  insert_rowid: ["CREATE TABLE IF NOT EXISTS t (policy TEXT NOT NULL, at INTEGER NOT NULL, n INTEGER NOT NULL)", (sql, i) => sql.exec("INSERT INTO t (policy, at, n) VALUES (?, ?, ?)", "api", T0 + i, 1)],
  append_one_column: ["CREATE TABLE IF NOT EXISTS t (at INTEGER NOT NULL)", (sql, i) => sql.exec("INSERT INTO t (at) VALUES (?)", T0 + i)],
  upsert_integer_key: ["CREATE TABLE IF NOT EXISTS t (at INTEGER PRIMARY KEY, n INTEGER NOT NULL)", (sql, i) => sql.exec("INSERT INTO t (at, n) VALUES (?, ?) ON CONFLICT (at) DO UPDATE SET n = n + excluded.n", T0 + i, 1)],
};

export class Statements extends DurableObject {
  fetch(request) {
    const [create, run] = FORMS[new URL(request.url).searchParams.get("form")];
    const sql = this.ctx.storage.sql;
    sql.exec(create);
    const started = performance.now();
    for (let i = 0; i < N; i++) void run(sql, i).rowsWritten;
    return new Response(String(((performance.now() - started) * 1000) / N));
  }
}

export default {
  fetch(request, env) {
    const url = new URL(request.url);
    const name = `${url.searchParams.get("form")}-${url.searchParams.get("round")}`;
    return env.STATEMENTS.get(env.STATEMENTS.idFromName(name)).fetch(request);
  },
};
