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

export default {
  fetch(request, env, ctx) {
    checkReinitialize();
    return wasm.fetch(request, env, ctx);
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
