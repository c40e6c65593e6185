-- bench.lua — the wrk request generator of scripts/bench.sh (`make bench`).
--
-- Settings come from the environment (wrk passes no options to init in the
-- main state, and done() runs there):
--   BENCH_MODE        plain | new | replay | nokey | mix: what key a request carries
--   BENCH_PATH        the request's path (default /idem/pay); the cell's
--                     location in the gateway (/plain/, /idem/, /zone/, ...)
--   BENCH_RUN         a string unique to this wrk run (keys of `new` never repeat)
--   BENCH_BODY        the request body (JSON)
--   BENCH_BODY_BYTES  instead: a JSON body of exactly this many bytes
--                     ({"pad":"xxx..."}), for the request body growth cells
--   BENCH_REPLAY_KEY  the key every `replay` request sends (stored beforehand)
--   BENCH_POOL        `mix`: replays pick one of BENCH_POOL keys BENCH_REPLAY_KEY-0 ...
--
-- plain and nokey send no key (plain goes to a location with the module
-- off), new a fresh key on every request, replay always BENCH_REPLAY_KEY;
-- mix 40 % new keys, 40 % replays of the pool's keys, 20 % without a key.
-- Every mode builds its request the same way (one Lua call per request,
-- a few string concatenations), so wrk's own cost is the same in all cells.
-- At the end one line starting with "BENCH " gives the figures scripts/bench.sh
-- parses (latencies in microseconds).

local mode       = os.getenv("BENCH_MODE") or "plain"
local path       = os.getenv("BENCH_PATH") or "/idem/pay"
local run        = os.getenv("BENCH_RUN") or tostring(os.time())
local body       = os.getenv("BENCH_BODY") or '{"amount":1000,"currency":"eur"}'
local body_bytes = tonumber(os.getenv("BENCH_BODY_BYTES") or "")
local replay_key = os.getenv("BENCH_REPLAY_KEY") or "bench-replay"
local pool       = tonumber(os.getenv("BENCH_POOL") or "64")

if body_bytes then
    body = '{"pad":"' .. string.rep("x", body_bytes - 10) .. '"}'
end

local thread_count = 0
function setup(thread)
    thread_count = thread_count + 1
    thread:set("tid", thread_count)
end

local tail = "\r\n" .. body
local head = "POST " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    .. "Content-Length: " .. #body .. "\r\n"
local nokey_req = head .. tail
local key_head  = head .. "Idempotency-Key: "
local replay_req = key_head .. replay_key .. "\r\n" .. tail
local prefix
local sent = 0

function init(args)
    -- a random part per thread as well as the run id and thread number
    math.randomseed(os.time() + (tid or 0) * 7919 + math.floor((os.clock() * 1e6) % 1e6))
    prefix = run .. "-" .. tostring(tid or 0) .. "-" .. string.format("%08x", math.random(0, 0x7fffffff)) .. "-"
end

local function fresh()
    return key_head .. prefix .. sent .. "\r\n" .. tail
end

local builders = {
    plain  = function() return nokey_req end,
    nokey  = function() return nokey_req end,
    replay = function() return replay_req end,
    new    = fresh,
    mix    = function()
        local slot = sent % 10
        if slot < 4 then return fresh() end
        if slot < 8 then
            return key_head .. replay_key .. "-" .. (sent % pool) .. "\r\n" .. tail
        end
        return nokey_req
    end,
}
local build = builders[mode] or error("BENCH_MODE: unknown mode " .. mode)

function request()
    sent = sent + 1
    return build()
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH mode=%s requests=%d duration_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d "
        .. "status_errors=%d connect=%d read=%d write=%d timeout=%d\n",
        mode, summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
        e.status, e.connect, e.read, e.write, e.timeout))
end
