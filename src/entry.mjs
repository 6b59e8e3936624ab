// The worker's entry module: scripts/build.sh bundles it with
// wasm-bindgen's output (./index.js, beside it in the build's staging
// directory) into build/index.js. It does what worker-build's shim did,
// less its cost per call, and makes each Durable Object a class that
// derives from the runtime's `DurableObject`, which is what the runtime
// serves RPC on: the worker calls every object by its method `serve`
// (src/edge/rpc.rs).
//
// worker-build's shim wrapped the entry point and every object class in a
// `Proxy` whose `get` wrapped each method it handed out in a new `Proxy`
// and an `await`, on every call; and its object classes did not derive
// from `DurableObject`, so the runtime served them `fetch` and `alarm`
// only. What it did on each call is kept: after a Rust panic (the panic
// hook of the `worker` crate sets `criticalError`) the wasm instance is
// replaced before the next call, and an object whose Rust half belongs to
// a replaced instance gets a new one. A trap that is not a panic (out of
// memory, say) is handled by wasm-bindgen's own abort handler, which the
// build enables: it replaces the instance before the next call too.
import { DurableObject } from "cloudflare:workers";
import * as wasm from "./index.js";
import wasmModule from "./index_bg.wasm";

wasm.initSync({ module: wasmModule });
Error.stackTraceLimit = 100;
const initState = wasm.__worker_init_state();

function checkReinitialize() {
  if (initState.criticalError) {
    console.log("Reinitializing Wasm application");
    wasm.__wbg_reset_state();
    initState.criticalError = false;
    initState.instanceId++;
  }
}

addEventListener("error", (e) => {
  if (e.error instanceof WebAssembly.RuntimeError) {
    console.error("Critical", e.error);
    initState.criticalError = true;
  }
});

// The prefix of Sluice's own paths, asked of the wasm on the first request
// (the config cannot change while an isolate lives); null while the config
// is invalid, and then no body is read here.
let ownPrefix;
const maxBodyBytes = wasm.maxBodyBytes();

/**
 * Whether the entry reads `request`'s body before calling the wasm: a body
 * of a declared length Sluice reads whole (at most maxBodyBytes) sent to
 * one of its own paths. Read here, the handler awaits nothing in Rust, and
 * a decision from an admission block is answered at once, with no promise
 * of the wasm's. Everything else goes in unread: a proxied body streams to
 * the origin untouched, a larger one is refused by its declared length,
 * and a chunked one is read by the handler as a stream, up to the limit.
 */
function readsFirst(request, env) {
  const length = request.headers.get("content-length");
  if (length === null || !/^[0-9]+$/.test(length) || Number(length) > maxBodyBytes) return false;
  if (ownPrefix === undefined) {
    checkReinitialize();
    ownPrefix = wasm.ownPrefix(env) ?? null;
  }
  if (ownPrefix === null) return false;
  // The path as src/http/url.rs takes it from the serialised URL.
  const url = request.url;
  const scheme = url.indexOf("://");
  const slash = url.indexOf("/", scheme < 0 ? 0 : scheme + 3);
  if (slash < 0 || !url.startsWith(ownPrefix, slash)) return false;
  const after = url[slash + ownPrefix.length];
  return after === undefined || after === "/" || after === "?" || after === "#";
}

/** The wasm's answer to `request`: a `Response`, or a promise of one. */
function answer(request, env, ctx, body) {
  checkReinitialize();
  return wasm.fetch(request, env, ctx, body);
}

export default {
  fetch(request, env, ctx) {
    if (!readsFirst(request, env)) return answer(request, env, ctx, undefined);
    // A body that cannot be read goes in unread, and the handler's own
    // read answers 400 for it, as for any body it cannot read.
    return request.arrayBuffer().then(
      (body) => answer(request, env, ctx, new Uint8Array(body)),
      () => answer(request, env, ctx, undefined),
    );
  },
};

/** A Durable Object class around the Rust one, `Rust`, delegating to it. */
function durableObject(Rust) {
  return class extends DurableObject {
    #rust;
    #instanceId;

    /** The Rust object, made again if the wasm instance was replaced. */
    #live() {
      checkReinitialize();
      if (this.#instanceId !== initState.instanceId) {
        this.#rust = new Rust(this.ctx, this.env);
        this.#instanceId = initState.instanceId;
      }
      return this.#rust;
    }

    /** One call from the worker by RPC: the call's JSON in, the reply's out. */
    serve(text) {
      return this.#live().serve(text);
    }

    /** The same calls from a worker of the version before (src/edge/rpc.rs). */
    fetch(request) {
      return this.#live().fetch(request);
    }

    alarm() {
      return this.#live().alarm();
    }
  };
}

export const Limiter = durableObject(wasm.Limiter);
export const Hub = durableObject(wasm.Hub);
export const Room = durableObject(wasm.Room);
