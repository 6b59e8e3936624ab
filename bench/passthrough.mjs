// The ceiling: a worker with no limiter that answers what Sluice's demo
// origin answers (a small JSON echo), so the only difference measured is
// the limiting.
export default {
  fetch(request) {
    const url = new URL(request.url);
    return Response.json({ method: request.method, path: url.pathname, origin: "passthrough", time_ms: Date.now() });
  },
};
