-- One key for every request, with room for all of them: every decision
-- reaches the same Durable Object and is admitted. The ten-minute window
-- keeps the key's sweep (thousands of rows) out of the benchmark, as in
-- many-keys.lua.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"key":"hot-%s","limit":1000000,"window_ms":600000}', tostring(os.time()))
