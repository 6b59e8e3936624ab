// The JavaScript baseline's worker options for Miniflare, in one place for
// every benchmark that runs it (bench/js-sliding-log.mjs says what it is).
// `sweep` sets SWEEP: the baseline then also frees idle keys, as Sluice does.
const here = new URL("./", import.meta.url).pathname;

export function baselineWorker({ compatibilityDate, sweep = false }) {
  return {
    name: sweep ? "swept" : "baseline",
    modules: true,
    scriptPath: here + "js-sliding-log.mjs",
    compatibilityDate,
    durableObjects: { LIMITER: { className: "JsLimiter", useSQLite: true } },
    bindings: sweep ? { SWEEP: true } : {},
  };
}
