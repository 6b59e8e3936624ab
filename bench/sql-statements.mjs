// What one admission's SQL statement costs the runtime, by the form of the
// statement and its table: a Durable Object runs 20 000 of one form in one
// request and answers the time per statement (the runtime's clock, which
// in local workerd advances during CPU work). Each form runs in a new
// object, three rounds in turn. Forms: Sluice's upsert into its
// WITHOUT ROWID (policy, at) table; a plain insert into it; a plain insert
// into a rowid table of the same columns; the JavaScript baseline's
// one-column append; an upsert keyed by an INTEGER PRIMARY KEY.
//   taskset -c 0 node bench/sql-statements.mjs
import { Miniflare } from "miniflare";

const here = new URL("./", import.meta.url).pathname;
const FORMS = ["upsert_without_rowid", "insert_without_rowid", "insert_rowid", "append_one_column", "upsert_integer_key"];
const mf = new Miniflare({
  modules: true,
  modulesRoot: here,
  scriptPath: here + "sql-statements-object.mjs",
  compatibilityDate: "2026-04-01",
  durableObjects: { STATEMENTS: { className: "Statements", useSQLite: true } },
});
const rows = FORMS.map(() => []);
for (let round = 0; round < 3; round++) {
  for (const [i, form] of FORMS.entries()) {
    const response = await mf.dispatchFetch(`http://bench/?form=${form}&round=${round}`);
    rows[i].push(Number(await response.text()));
  }
}
await mf.dispose();
const lines = ["| statement | µs per statement in each round |", "|---|---|"];
for (const [i, form] of FORMS.entries()) lines.push(`| ${form} | ${rows[i].map((us) => us.toFixed(2)).join(", ")} |`);
process.stderr.write(`${lines.join("\n")}\n`);
