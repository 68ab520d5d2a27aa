-- An open loop for wrk (`ragtime bench ceiling`, bench/suites/ceiling/wrk.py runs it):
-- Poisson arrivals at a fixed mean rate, a request body of a file per arrival, and one line of
-- JSON at the end.
--
--   wrk -t THREADS -c CONNECTIONS -d SECONDS -s open_loop.lua URL -- BODIES RATE SEED THREADS
--
-- wrk alone keeps each connection busy back to back (a closed loop). Here delay(), which wrk
-- calls before each request a connection sends, hands that connection the next arrival of a
-- Poisson process of RATE per second (split evenly across the threads) and waits until it is
-- due: while a connection is free at each arrival, requests leave on the schedule, whatever the
-- server's pace. An arrival that finds every connection busy leaves as soon as one frees, late;
-- `late` counts those more than 1 ms late. wrk times each request from when it is written to
-- its response's last byte (wrk.c, response_complete).
--
-- request() sends the bodies of BODIES (a JSON body a line) in turn, each thread its share,
-- cycling; response() counts answers that are not a 200 ending in a `done` event; done() prints
-- "ragtime-wrk " and a JSON object: wrk's counts and errors, its latency percentiles in
-- microseconds, and this script's sent, late and bad counts.

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } ragtime_timespec;
int clock_gettime(int clk_id, ragtime_timespec *tp);
]])
local CLOCK_MONOTONIC = 1
local now_ts = ffi.new("ragtime_timespec")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, now_ts)
  return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
end

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  bodies = {}
  for line in io.lines(args[1]) do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  assert(#bodies > 0, "no request bodies in " .. args[1])
  local n_threads = tonumber(args[4] or "1")
  mean_gap_ms = 1000 * n_threads / tonumber(args[2])
  math.randomseed(tonumber(args[3] or "0") * 1000 + (id or 1))
  step = n_threads
  index = (id or 1) - 1
  due = nil
  lead_ms = tonumber(args[5] or "0")
  sent, late, late_ms_max, bad = 0, 0, 0, 0
end

function delay()
  local now = now_ms()
  due = (due or now + lead_ms) + -math.log(1 - math.random()) * mean_gap_ms
  local wait = due - now
  if wait < -1 then
    late = late + 1
    if -wait > late_ms_max then late_ms_max = -wait end
  end
  if wait <= 0 then return 0 end
  return math.floor(wait + 0.5)
end

function request()
  sent = sent + 1
  local body = bodies[index % #bodies + 1]
  index = index + step
  return wrk.format("POST", nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 or not body:find("event: done", 1, true) then bad = bad + 1 end
end

function done(summary, latency, requests)
  local s, l, lmax, b = 0, 0, 0, 0
  for _, thread in ipairs(threads) do
    s = s + thread:get("sent")
    l = l + thread:get("late")
    lmax = math.max(lmax, thread:get("late_ms_max"))
    b = b + thread:get("bad")
  end
  local e = summary.errors
  local pct = function(q) return summary.requests > 0 and latency:percentile(q) or 0 end
  local lo = summary.requests > 0 and latency.min or 0
  local fields = {
    string.format('"duration_us": %d', summary.duration),
    string.format('"requests": %d', summary.requests),
    string.format('"bytes": %d', summary.bytes),
    string.format('"sent": %d, "late": %d, "late_ms_max": %.3f, "bad": %d', s, l, lmax, b),
    string.format(
      '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}',
      e.connect, e.read, e.write, e.status, e.timeout
    ),
    string.format(
      '"latency_us": {"min": %d, "max": %d, "mean": %.1f, "stdev": %.1f, '
        .. '"p50": %d, "p90": %d, "p99": %d, "p99.9": %d}',
      lo, latency.max, latency.mean, latency.stdev, pct(50), pct(90), pct(99), pct(99.9)
    ),
  }
  io.write("ragtime-wrk {" .. table.concat(fields, ", ") .. "}\n")
end
