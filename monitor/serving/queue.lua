-- The fair queue of one pool: a server profile, served by one or more nodes. People first.
--
-- One script, several operations (ARGV[1]); every operation but 'refresh' ends by handing out
-- what can be handed out ('dispatch'), so a freed slot goes to its waiter at once: the waiter
-- blocks on its own wake list (BLPOP), it does not poll.
--
-- Keys, under the pool's prefix P:
--   P..'users', P..'bg:users'          owners with tickets waiting, in turn order (people / background)
--   P..'wait:'..owner, P..'bg:wait:'..owner   an owner's waiting tickets, oldest first
--   P..'t:'..ticket                    a ticket: owner, priority, holder, affinity, patience (ms), pos, node, model
--   P..'seen'                          waiting ticket -> when its waiter was last heard (ms)
--   P..'active', P..'bg:active'        held ticket -> end of its lease (ms); background ones in both
--   P..'node:'..node                   held ticket -> end of its lease, per node
--   P..'wake:'..ticket                 what its waiter is told: 'g <node> <model>', 'p <place>', 'x' (dropped)
--   P..'expired:'..ticket              a lease that ran out, or a ticket that left: never put back
--   P..'grants'                        the last grants, newest first: '<ms> <priority> <ticket> <owner> <node>'
--   'qwenweb:holder:'..holder          what one process holds or waits for: '<P>\t<ticket>'
--   'qwenweb:holders:'..host           the processes seen on a host: holder ('<kind>:<host>:<pid>:<start>') -> kind
-- A node says what it serves in 'qwenweb:node:'..node..':ready', a hash written by its heartbeat:
-- pool (profile name) -> '<slots> <model id>'. The caller names the pool's nodes (ARGV).
-- Every time is Redis's own clock (TIME), so processes on several hosts agree on leases.

local op, P, pool = ARGV[1], ARGV[2], ARGV[3]
local lease, stale, grace, log_length = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local node_count = tonumber(ARGV[8])
local nodes = {}
for i = 1, node_count do nodes[i] = ARGV[8 + i] end
local arg = 9 + node_count -- the operation's own arguments start here
local WAKE_TTL_MS = 60000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local now = now_ms()

local function lines(priority)
  if priority == 'background' then return P .. 'bg:users', P .. 'bg:wait:' end
  return P .. 'users', P .. 'wait:'
end

local function wake(ticket, message)
  local key = P .. 'wake:' .. ticket
  redis.call('RPUSH', key, message)
  redis.call('PEXPIRE', key, WAKE_TTL_MS)
end

-- A ticket leaves every structure (waiting or held).
local function forget(ticket)
  local key = P .. 't:' .. ticket
  local info = redis.call('HMGET', key, 'owner', 'priority', 'node', 'holder')
  local owner, priority, node, holder = info[1], info[2], info[3], info[4]
  if owner then
    local users, wait = lines(priority)
    redis.call('LREM', wait .. owner, 0, ticket)
    if redis.call('LLEN', wait .. owner) == 0 then redis.call('LREM', users, 0, owner) end
  end
  redis.call('ZREM', P .. 'seen', ticket)
  redis.call('ZREM', P .. 'active', ticket)
  redis.call('ZREM', P .. 'bg:active', ticket)
  if node then redis.call('ZREM', P .. 'node:' .. node, ticket) end
  if holder then redis.call('SREM', 'qwenweb:holder:' .. holder, P .. '\t' .. ticket) end
  redis.call('DEL', key)
end

-- A ticket that is over (its lease ran out, or it left): a refresh already on its way never puts it back.
local ENDED_TTL_MS = 600000
local function mark_ended(ticket)
  redis.call('SET', P .. 'expired:' .. ticket, '1', 'PX', ENDED_TTL_MS)
end

-- Leases that ran out (a holder that stopped refreshing: killed or frozen) and waiters no longer
-- heard (their process died in line) give their places back.
local function expire()
  for _, ticket in ipairs(redis.call('ZRANGEBYSCORE', P .. 'active', '-inf', now)) do
    forget(ticket)
    mark_ended(ticket)
  end
  for _, ticket in ipairs(redis.call('ZRANGEBYSCORE', P .. 'seen', '-inf', now - stale)) do
    forget(ticket)
    wake(ticket, 'x')
  end
end

-- Waiting tickets in the order they are served: round by round, one ticket per owner a round, owners
-- in turn order (an owner just served goes to the back).
local function order(priority)
  local users, wait = lines(priority)
  local owners = redis.call('LRANGE', users, 0, -1)
  local tickets, longest = {}, 0
  for i, owner in ipairs(owners) do
    tickets[i] = redis.call('LRANGE', wait .. owner, 0, -1)
    if #tickets[i] > longest then longest = #tickets[i] end
  end
  local out = {}
  for round = 1, longest do
    for i, owner in ipairs(owners) do
      local ticket = tickets[i][round]
      if ticket then out[#out + 1] = { ticket, owner } end
    end
  end
  return out
end

-- Free slots per node that serves the pool now (nil: the node does not serve it), and the slots in all.
local function node_state()
  local free, model, total = {}, {}, 0
  for _, node in ipairs(nodes) do
    local served = redis.call('HGET', 'qwenweb:node:' .. node .. ':ready', pool)
    if served then
      local slots, id = string.match(served, '^(%d+) ?(.*)$')
      slots = tonumber(slots) or 0
      free[node] = math.max(0, slots - redis.call('ZCARD', P .. 'node:' .. node))
      model[node] = id or ''
      total = total + slots
    end
  end
  return free, model, total
end

-- The node a waiting ticket may take now, or nil. A follow-up waits for the node holding its
-- conversation's cache until its patience runs out (the time a full prompt pass elsewhere would
-- take: waiting longer could only cost more), then takes any node; others take the freest node.
local function choose(ticket, free)
  local info = redis.call('HMGET', P .. 't:' .. ticket, 'affinity', 'patience')
  local affinity, patience = info[1] or '', tonumber(info[2] or '0') or 0
  if affinity ~= '' and free[affinity] ~= nil then
    if free[affinity] > 0 then return affinity end
    if now < patience then return nil end
  end
  local best, most = nil, 0
  for _, node in ipairs(nodes) do
    if (free[node] or 0) > most then best, most = node, free[node] end
  end
  return best
end

local function grant(ticket, owner, priority, node, model)
  local users, wait = lines(priority)
  redis.call('LREM', wait .. owner, 1, ticket)
  redis.call('LREM', users, 1, owner)
  if redis.call('LLEN', wait .. owner) > 0 then redis.call('RPUSH', users, owner) end
  redis.call('ZREM', P .. 'seen', ticket)
  local ends = now + lease
  redis.call('ZADD', P .. 'active', ends, ticket)
  redis.call('ZADD', P .. 'node:' .. node, ends, ticket)
  if priority == 'background' then redis.call('ZADD', P .. 'bg:active', ends, ticket) end
  redis.call('HSET', P .. 't:' .. ticket, 'node', node, 'model', model)
  wake(ticket, 'g ' .. node .. ' ' .. model)
  redis.call('LPUSH', P .. 'grants', now .. ' ' .. priority .. ' ' .. ticket .. ' ' .. owner .. ' ' .. node)
  redis.call('LTRIM', P .. 'grants', 0, log_length - 1)
end

local function redis_uptime_s()
  return tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')) or 0
end

local function dispatch()
  -- A Redis that just (re)started may have lost the leases of answers still streaming: their holders
  -- put them back within a moment (their keepers see their connection to Redis end, and refresh at
  -- once and every 0.25 s until Redis answers: monitor/serving/leases.py).
  -- Nothing is handed out before then, so no slot is given twice.
  if redis_uptime_s() < grace then return end
  expire()
  local free, model, total = node_state()
  local free_total = 0
  for _, node in ipairs(nodes) do free_total = free_total + (free[node] or 0) end
  local waiting = {}
  for _, entry in ipairs(order('person')) do
    local node = nil
    if free_total > 0 then node = choose(entry[1], free) end
    if node then
      grant(entry[1], entry[2], 'person', node, model[node])
      free[node], free_total = free[node] - 1, free_total - 1
    else
      waiting[#waiting + 1] = entry[1]
    end
  end
  for place, ticket in ipairs(waiting) do
    local key = P .. 't:' .. ticket
    if tonumber(redis.call('HGET', key, 'pos') or '0') ~= place then
      redis.call('HSET', key, 'pos', place)
      wake(ticket, 'p ' .. place)
    end
  end
  if #waiting > 0 or free_total == 0 then return end
  -- Background work only while no person waits, and never in the last free slot of a pool with several.
  local limit = total - 1
  if total <= 1 then limit = 1 end
  local running = redis.call('ZCARD', P .. 'bg:active')
  for _, entry in ipairs(order('background')) do
    if free_total == 0 or running >= limit then return end
    local node = choose(entry[1], free)
    if node then
      grant(entry[1], entry[2], 'background', node, model[node])
      free[node], free_total, running = free[node] - 1, free_total - 1, running + 1
    end
  end
end

-- What a ticket's waiter should know now: granted, its place, or that it is gone.
local function status(ticket)
  local info = redis.call('HMGET', P .. 't:' .. ticket, 'owner', 'node', 'model', 'pos')
  if not info[1] then return 'x' end
  if info[2] then return 'g ' .. info[2] .. ' ' .. (info[3] or '') end
  return 'p ' .. (info[4] or '0')
end

if op == 'join' then
  local ticket, owner, priority, holder = ARGV[arg], ARGV[arg + 1], ARGV[arg + 2], ARGV[arg + 3]
  local affinity, patience_ms = ARGV[arg + 4], tonumber(ARGV[arg + 5])
  local key = P .. 't:' .. ticket
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'owner', owner, 'priority', priority, 'holder', holder, 'affinity', affinity,
      'patience', now + patience_ms, 'pos', 0)
    local users, wait = lines(priority)
    redis.call('RPUSH', wait .. owner, ticket)
    if not redis.call('LPOS', users, owner) then redis.call('RPUSH', users, owner) end
    redis.call('SADD', 'qwenweb:holder:' .. holder, P .. '\t' .. ticket)
    local kind, host = string.match(holder, '^([^:]*):([^:]*):')
    if host then redis.call('HSET', 'qwenweb:holders:' .. host, holder, kind) end
  end
  if not redis.call('HGET', key, 'node') then redis.call('ZADD', P .. 'seen', now, ticket) end
  dispatch()
  return status(ticket)
elseif op == 'poll' then
  local ticket = ARGV[arg]
  local key = P .. 't:' .. ticket
  if redis.call('EXISTS', key) == 1 and not redis.call('HGET', key, 'node') then
    redis.call('ZADD', P .. 'seen', now, ticket)
  end
  dispatch()
  return status(ticket)
elseif op == 'leave' then
  -- A waiter that gives up, or a holder that is done: the slot (granted or not) goes to the next.
  -- Marked as ended too: a refresh of it already on its way (the keeper read its grants just before the
  -- release) must not put back a lease that nobody holds any more.
  local ticket = ARGV[arg]
  forget(ticket)
  redis.call('DEL', P .. 'wake:' .. ticket)
  mark_ended(ticket)
  dispatch()
  return 'ok'
elseif op == 'refresh' then
  -- Held tickets, each: ticket, owner, priority, holder, node, model. A ticket Redis no longer knows
  -- (Redis restarted and lost it) is put back; one whose lease ran out is not.
  local answers = {}
  local count = tonumber(ARGV[arg])
  for i = 0, count - 1 do
    local base = arg + 1 + i * 6
    local ticket, owner, priority, holder, node, model =
      ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5]
    if redis.call('EXISTS', P .. 'expired:' .. ticket) == 1 then
      answers[#answers + 1] = 'expired'
    else
      local ends = now + lease
      redis.call('ZADD', P .. 'active', ends, ticket)
      redis.call('ZADD', P .. 'node:' .. node, ends, ticket)
      if priority == 'background' then redis.call('ZADD', P .. 'bg:active', ends, ticket) end
      local key = P .. 't:' .. ticket
      if redis.call('EXISTS', key) == 0 then
        redis.call('HSET', key, 'owner', owner, 'priority', priority, 'holder', holder, 'node', node, 'model', model)
        redis.call('SADD', 'qwenweb:holder:' .. holder, P .. '\t' .. ticket)
      end
      answers[#answers + 1] = 'ok'
    end
  end
  return answers
elseif op == 'dispatch' then
  dispatch()
  return 'ok'
elseif op == 'drop_holder' then
  -- A process that is gone (its successor starts up): every ticket it held or waited with, in every
  -- pool, is given up at once instead of when its lease runs out.
  local holder, dropped = ARGV[arg], 0
  for _, member in ipairs(redis.call('SMEMBERS', 'qwenweb:holder:' .. holder)) do
    local prefix, ticket = string.match(member, '^(.*)\t(.*)$')
    if prefix then
      P = prefix
      forget(ticket)
      redis.call('DEL', P .. 'wake:' .. ticket)
      dropped = dropped + 1
    end
  end
  redis.call('DEL', 'qwenweb:holder:' .. holder)
  return dropped
end
return redis.error_reply('unknown queue operation ' .. tostring(op))
