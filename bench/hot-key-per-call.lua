-- hot-key.lua with one object call per decision: `"local": false` keeps
-- the isolate from deciding from admission blocks, so this measures the
-- per-call path (issue 30's item 5) beside the blocks' figure.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"key":"percall-%s","limit":1000000,"window_ms":600000,"local":false}', tostring(os.time()))
