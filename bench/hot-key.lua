-- One key for every request, with room for all of them: every decision
-- reaches the same Durable Object and is admitted.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"key":"hot-%s","limit":1000000,"window_ms":60000}', tostring(os.time()))
