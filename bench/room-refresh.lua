-- Waiting visitors refreshing the waiting page: each request carries one
-- of the tickets given as arguments (`Cookie` pairs), in turn, and asks
-- for HTML as a browser does.
local cookies = {}
local next_cookie = 0

function init(args)
  for _, cookie in ipairs(args) do
    table.insert(cookies, cookie)
  end
end

function request()
  next_cookie = next_cookie % #cookies + 1
  return wrk.format("GET", nil, { ["Cookie"] = cookies[next_cookie], ["Accept"] = "text/html" })
end
