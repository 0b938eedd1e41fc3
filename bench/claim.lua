-- wrk script: every request is a one-step claim of a fresh random key in the
-- "default" namespace. Usage (with `spent serve` running):
--   wrk -t2 -c64 -d10s --latency -s bench/claim.lua http://127.0.0.1:7070/
function setup(thread)
  thread:set("prefix", tostring(math.random(1, 1e9)))
end

function init(args)
  counter = 0
  math.randomseed(os.time() + tonumber(prefix))
end

function request()
  counter = counter + 1
  local key = prefix .. "-" .. counter .. "-" .. math.random(1, 1e9)
  local body = '{"namespace":"default","key":"' .. key .. '","result":"b2s="}'
  return wrk.format("POST", "/v1/claim", {["Content-Type"] = "application/json"}, body)
end
