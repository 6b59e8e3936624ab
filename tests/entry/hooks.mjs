// Module resolution for entry.test.mjs: the entry's imports go to fakes.mjs.
const fakes = new URL("./fakes.mjs", import.meta.url).href;
const stubbed = new Set(["cloudflare:workers", "./index.js", "./index_bg.wasm"]);

export async function resolve(specifier, context, next) {
  if (stubbed.has(specifier)) return { url: fakes, shortCircuit: true };
  return next(specifier, context);
}
