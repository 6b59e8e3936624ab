// Stand-ins for what src/entry.mjs imports, so that its recovery after a
// panic is tested on node without a wasm that can be made to panic: the
// runtime's `cloudflare:workers`, the wasm module, and wasm-bindgen's glue
// (`./index.js`), which here keeps the same shared state the `worker`
// crate's panic hook writes (`globalThis.__worker_init_state`).

export class DurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export default { wasm: "module" };

/** What the glue did, for the tests to read. */
export const log = { inits: 0, resets: 0, made: [] };

const state = (globalThis.__worker_init_state = { criticalError: false, instanceId: 0 });
/** The wasm instance the glue runs now; a reset makes the next one. */
let generation = 0;

function start() {
  generation += 1;
  // The `worker` crate's start function counts instances, as here.
  state.instanceId += 1;
}

export function initSync() {
  log.inits += 1;
  start();
}

export const __worker_init_state = () => state;

export function __wbg_reset_state() {
  log.resets += 1;
  start();
}

/** A Rust panic as the glue sees it: the hook marks the state, then the
 * wasm traps. */
function panic() {
  state.criticalError = true;
  throw new WebAssembly.RuntimeError("unreachable");
}

export function fetch(request) {
  if (request === "panic") panic();
  return { answeredBy: generation };
}

class Rust {
  constructor(ctx, env) {
    this.generation = generation;
    log.made.push({ ctx, env, generation });
  }

  serve(text) {
    if (text === "panic") panic();
    return { answeredBy: this.generation, now: generation };
  }

  fetch() {
    return this.serve("fetch");
  }

  alarm() {
    return this.serve("alarm");
  }
}

export class Limiter extends Rust {}
export class Hub extends Rust {}
export class Room extends Rust {}
