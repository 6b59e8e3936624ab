-- One new key per request: every decision reaches a fresh Durable Object.
-- The first script argument makes the keys unique to this run of wrk.
-- The window is ten minutes so that no key's sweep (its alarm, one window
-- after its admission) lands inside a benchmark: a sweep of thousands of
-- keys made by an earlier round would stall the runtime under a later one
-- and be counted against whatever that round measures.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
local run = tostring(os.time())
init = function(args)
  run = run .. "-" .. (args[1] or "0")
end
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, string.format('{"key":"many-%s-%d","limit":100,"window_ms":600000}', run, n))
end
