// The worker's entry module (src/entry.mjs) replaces the wasm instance
// after a Rust panic or a trap, before the next call, and gives a Durable
// Object whose Rust half belonged to the replaced instance a new one. No
// request can make the real wasm panic, so this runs the entry on node
// against fakes of what it imports (fakes.mjs), which share the state the
// `worker` crate's panic hook writes.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);

/** The listeners the entry adds to the isolate, by event. */
const listeners = {};
globalThis.addEventListener = (type, listener) => {
  (listeners[type] ??= []).push(listener);
};

let entry;
let fakes;
before(async () => {
  entry = await import("../../src/entry.mjs");
  fakes = await import("./fakes.mjs");
});

test("the instance is made once at load and kept while nothing panics", () => {
  assert.equal(fakes.log.inits, 1);
  const first = entry.default.fetch("request").answeredBy;
  assert.equal(entry.default.fetch("request").answeredBy, first);
  assert.equal(fakes.log.resets, 0);
});

test("after a panic in a request, the next request runs on a new instance, and only the next", () => {
  const before = entry.default.fetch("request").answeredBy;
  assert.throws(() => entry.default.fetch("panic"), WebAssembly.RuntimeError);
  const after = entry.default.fetch("request").answeredBy;
  assert.equal(fakes.log.resets, 1);
  assert.notEqual(after, before);
  assert.equal(entry.default.fetch("request").answeredBy, after);
  assert.equal(fakes.log.resets, 1);
});

test("an object whose Rust half belonged to the replaced instance gets a new one, with its own ctx and env", () => {
  const ctx = { id: "limiter-ctx" };
  const env = { id: "env" };
  const limiter = new entry.Limiter(ctx, env);
  const made = fakes.log.made.length;
  const first = limiter.serve("call");
  assert.equal(first.answeredBy, first.now);
  limiter.serve("call");
  assert.equal(fakes.log.made.length, made + 1, "one Rust half while the instance lives");

  assert.throws(() => limiter.serve("panic"), WebAssembly.RuntimeError);
  const again = limiter.alarm();
  assert.equal(again.answeredBy, again.now, "the Rust half is of the new instance");
  assert.notEqual(again.now, first.now);
  assert.equal(fakes.log.made.length, made + 2);
  assert.deepEqual(fakes.log.made.at(-1), { ctx, env, generation: again.now });

  // Another object, made before the panic and called only after it.
  const hub = new entry.Hub({ id: "hub-ctx" }, env);
  assert.equal(hub.fetch().answeredBy, again.now);
});

test("a trap that reaches the isolate's error event replaces the instance before the next call", () => {
  const before = entry.default.fetch("request").answeredBy;
  const resets = fakes.log.resets;
  for (const listener of listeners.error) listener({ error: new WebAssembly.RuntimeError("out of bounds") });
  assert.notEqual(entry.default.fetch("request").answeredBy, before);
  assert.equal(fakes.log.resets, resets + 1);
  for (const listener of listeners.error) listener({ error: new TypeError("not the wasm's") });
  assert.equal(fakes.log.resets, resets + 1, "an error not from the wasm replaces nothing");
  entry.default.fetch("request");
  assert.equal(fakes.log.resets, resets + 1);
});
