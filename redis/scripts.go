package redis

import (
	"crypto/sha1"
	"encoding/hex"
)

// The Lua scripts, one per operation, each run atomically by Redis on the
// keys of one hash tag. Instants arrive as (Unix second, nanosecond) pairs
// and are compared as pairs: a Lua number is a double, exact for each half but
// not for Unix nanoseconds. Record fields are read at the offsets of
// codec.go (Lua strings count from 1: offset k is position k+1).
//
// Replies: claim returns 1 when it wrote the record, else the live record;
// complete and release return a status (0 done, 1 not found, 2 not pending,
// 3 seq mismatch), complete with the record after it.

// luaPrelude is shared by every script that judges time or reads records.
const luaPrelude = `
local function before(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end
local function check(v)
  if string.byte(v, 1) ~= 1 then
    return redis.error_reply('spent: unknown record format ' .. string.byte(v, 1))
  end
end
`

// claimLua: KEYS record, pending index, seq index of the record's node;
// ARGV record, now sec, now nsec, retake ("1" or "0"), expires_at ms
// (rounded up), lease_until ms, index member, result limit ("0" for none),
// seq counter. A write adds the record to the seq index in the same step. A live record whose result is longer
// than the limit is returned as {the record without its result bytes, the
// result's length}, so that the result never leaves the server.
const claimLua = luaPrelude + `
local old = redis.call('GET', KEYS[1])
local oldPending = false
if old then
  local bad = check(old)
  if bad then return bad end
  local st = string.byte(old, 2)
  local es, en, ls, ln = struct.unpack('>i8I4i8I4', old, 3)
  local ns, nn = tonumber(ARGV[2]), tonumber(ARGV[3])
  if before(ns, nn, es, en) and not (ARGV[4] == '1' and st == 1 and not before(ns, nn, ls, ln)) then
    local lim = tonumber(ARGV[8])
    if lim > 0 and bit.band(string.byte(old, 57), 1) == 1 then
      local nl, rl, pl, fl = struct.unpack('>BI2I2B', old, 51)
      local roff = 58 + nl + rl + pl + fl
      local n = #old - roff + 1
      if n > lim then return {string.sub(old, 1, roff - 1), n} end
    end
    return old
  end
  oldPending = st == 1
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[9], ARGV[7])
if string.byte(ARGV[1], 2) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[7])
elseif oldPending then
  redis.call('ZREM', KEYS[2], ARGV[7])
end
return 1
`

// completeLua: KEYS record, pending index; ARGV seq, result, now sec, now
// nsec, index member, the stored zero time, the ends channel. A completion
// publishes the record's member on the ends channel (store.WatchEnds), in
// the script, so that every completion made is told.
const completeLua = luaPrelude + `
local v = redis.call('GET', KEYS[1])
if not v then return {1} end
local bad = check(v)
if bad then return bad end
local es, en = struct.unpack('>i8I4', v, 3)
if not before(tonumber(ARGV[3]), tonumber(ARGV[4]), es, en) then return {1} end
local nl, rl, pl, fl = struct.unpack('>BI2I2B', v, 51)
local roff = 58 + nl + rl + pl + fl
local seq = string.sub(v, 27, 38)
if string.byte(v, 2) ~= 1 then
  if seq == ARGV[1] and string.sub(v, roff) == ARGV[2] then return {0, v} end
  return {2}
end
if seq ~= ARGV[1] then return {3} end
local flags = string.char(bit.bor(string.byte(v, 57), 1))
local nv = string.sub(v, 1, 1) .. '\2' .. string.sub(v, 3, 14) .. ARGV[6] ..
  string.sub(v, 27, 56) .. flags .. string.sub(v, 58, roff - 1) .. ARGV[2]
redis.call('SET', KEYS[1], nv, 'KEEPTTL')
redis.call('ZREM', KEYS[2], ARGV[5])
redis.call('PUBLISH', ARGV[7], ARGV[5])
return {0, nv}
`

// releaseLua: KEYS record, pending index, seq index of the seq's node;
// ARGV seq, now sec, now nsec, index member, the ends channel, on which a
// release publishes the member as a completion does.
const releaseLua = luaPrelude + `
local v = redis.call('GET', KEYS[1])
if not v then return 1 end
local bad = check(v)
if bad then return bad end
local es, en = struct.unpack('>i8I4', v, 3)
if not before(tonumber(ARGV[2]), tonumber(ARGV[3]), es, en) then return 1 end
if string.byte(v, 2) ~= 1 then return 2 end
if string.sub(v, 27, 38) ~= ARGV[1] then return 3 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 0
`

// countLua: KEYS counter; ARGV limit, expires_at sec, expires_at nsec,
// expires_at ms (rounded up), now sec, now nsec. Returns {added, value,
// expires sec, expires nsec}. The stored value is the int64 count, then the
// expiry as (int64 second, uint32 nanosecond), big-endian.
const countLua = luaPrelude + `
local v = redis.call('GET', KEYS[1])
local val, es, en = 0, tonumber(ARGV[2]), tonumber(ARGV[3])
local live = false
if v then
  if #v ~= 20 then return redis.error_reply('spent: counter of ' .. #v .. ' bytes') end
  local cv, ces, cen = struct.unpack('>i8i8I4', v)
  if before(tonumber(ARGV[5]), tonumber(ARGV[6]), ces, cen) then
    val, es, en, live = cv, ces, cen, true
  end
end
if val >= tonumber(ARGV[1]) then return {0, val, es, en} end
val = val + 1
if live then
  redis.call('SET', KEYS[1], struct.pack('>i8i8I4', val, es, en), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], struct.pack('>i8i8I4', val, es, en), 'PXAT', ARGV[4])
end
return {1, val, es, en}
`

// reserveLua: KEYS seq counter of a node, the set of nodes; ARGV n, node.
// It adds the node to the set (the seq index trim goes through its nodes). Returns the last counter
// of the block.
const reserveLua = `
redis.call('SADD', KEYS[2], ARGV[2])
return redis.call('INCRBY', KEYS[1], ARGV[1])`

// pendingLua lists the pending records of one tag: KEYS pending index; ARGV
// record key prefix, lease_until bound in ms (rounded
// down), bound sec, bound nsec, namespace ("" for all), limit. It walks the
// index in lease order and returns {member, record, ...}: the first limit
// matches and every further match with the same score as the last, so that
// the caller, sorting by the exact lease and seq, finds the true first
// limit. Index entries of records that are gone or complete are removed.
const pendingLua = luaPrelude + `
local bs, bn = tonumber(ARGV[3]), tonumber(ARGV[4])
local limit = tonumber(ARGV[6])
local out, n, last, off = {}, 0, nil, 0
while true do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', off, 256)
  if #page == 0 then return out end
  local removed = 0
  for i = 1, #page, 2 do
    local m, sc = page[i], page[i + 1]
    if n >= limit and sc ~= last then return out end
    local v = redis.call('GET', ARGV[1] .. m)
    if not v or string.byte(v, 2) ~= 1 then
      redis.call('ZREM', KEYS[1], m)
      removed = removed + 1
    else
      local bad = check(v)
      if bad then return bad end
      local es, en, ls, ln = struct.unpack('>i8I4i8I4', v, 3)
      if before(bs, bn, es, en) and not before(bs, bn, ls, ln) and
          (ARGV[5] == '' or string.sub(v, 58, 57 + string.byte(v, 51)) == ARGV[5]) then
        out[#out + 1] = m
        out[#out + 1] = v
        n = n + 1
        last = sc
      end
    end
  end
  off = off + #page / 2 - removed
end
`

// trimLua trims the pending index of one tag: KEYS pending index, trim
// cursor; ARGV record key prefix, limit. It looks at up to limit entries
// from the rank the cursor holds, removes those whose record the engine has
// forgotten (or that is no longer pending), moves the cursor past the rest
// (back to the start at the end of the index), and returns how many it
// removed. Successive calls go round the whole index, limit entries at a
// time, whatever live entries sit at its start.
const trimLua = `
local n = redis.call('ZCARD', KEYS[1])
local start = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if start >= n then start = 0 end
local limit = tonumber(ARGV[2])
local ms = redis.call('ZRANGE', KEYS[1], start, start + limit - 1)
local removed = 0
for _, m in ipairs(ms) do
  local v = redis.call('GET', ARGV[1] .. m)
  if not v or string.byte(v, 2) ~= 1 then
    redis.call('ZREM', KEYS[1], m)
    removed = removed + 1
  end
end
local next = start + #ms - removed
if next >= n - removed then next = 0 end
if next == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], next)
end
return removed
`

// purgeLua: KEYS record, pending index; ARGV namespace, index member, seq
// index prefix of the tag (P{T}:q:). Deletes the record if it belongs to
// the namespace, live or expired, with its pending-index and seq-index
// entries, and returns 1; else returns 0. The seq index key is named by the
// record's node, read here: it has the record's tag, so the script still
// touches one slot.
const purgeLua = luaPrelude + `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local bad = check(v)
if bad then return bad end
if string.sub(v, 58, 57 + string.byte(v, 51)) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', ARGV[3] .. struct.unpack('>I4', v, 27), ARGV[2])
return 1
`

// claimNewLua is the fast path of a one-step claim: KEYS record, seq index
// of the record's node; ARGV record, expires_at ms (rounded up), index
// member, seq counter, get ("1" to return the stored record, "0" not to).
// It writes the record if no record is stored, with its seq index entry,
// and returns nil; else it writes nothing and returns the stored record
// (with get) or 0 (without: its result may be long).
const claimNewLua = `
local old
if ARGV[5] == '1' then
  old = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PXAT', ARGV[2])
else
  old = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', ARGV[2])
  if old then old = false else old = 0 end
end
if not old then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
end
return old
`

// seqLua lists one tag's records of one node by seq: KEYS seq index of the
// node under the tag; ARGV record key prefix of the tag, from, to (scores,
// both included), "1" for descending, limit, node (4 bytes, big-endian),
// now sec, now nsec. It walks the index in score order and returns
// {member, record without its result, result length, ...} for up to limit
// live records whose seq is their entry's; the entries of records that are
// gone or now carry another seq are removed on the way, those of expired
// records (which the engine forgets soon) are skipped.
const seqLua = luaPrelude + `
local limit = tonumber(ARGV[5])
local ns, nn = tonumber(ARGV[7]), tonumber(ARGV[8])
local out, n, off = {}, 0, 0
while n < limit do
  local page
  if ARGV[4] == '1' then
    page = redis.call('ZRANGE', KEYS[1], ARGV[3], ARGV[2], 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', off, 256)
  else
    page = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'BYSCORE', 'WITHSCORES', 'LIMIT', off, 256)
  end
  if #page == 0 then return out end
  local removed = 0
  for i = 1, #page, 2 do
    if n >= limit then return out end
    local m, sc = page[i], page[i + 1]
    local v = redis.call('GET', ARGV[1] .. m)
    if not v or string.sub(v, 27, 38) ~= ARGV[6] .. struct.pack('>I4I4', math.floor(tonumber(sc) / 4294967296), tonumber(sc) % 4294967296) then
      redis.call('ZREM', KEYS[1], m)
      removed = removed + 1
    else
      local bad = check(v)
      if bad then return bad end
      local es, en = struct.unpack('>i8I4', v, 3)
      if before(ns, nn, es, en) then
        local rlen, head = 0, v
        if bit.band(string.byte(v, 57), 1) == 1 then
          local nl, rl, pl, fl = struct.unpack('>BI2I2B', v, 51)
          local roff = 58 + nl + rl + pl + fl
          rlen = #v - roff + 1
          head = string.sub(v, 1, roff - 1)
        end
        out[#out + 1] = m
        out[#out + 1] = head
        out[#out + 1] = rlen
        n = n + 1
      end
    end
  end
  off = off + #page / 2 - removed
end
return out
`

// seqTrimLua trims one tag's seq index of one node, as trimLua does the
// pending index: KEYS seq index, trim cursor; ARGV record key prefix,
// limit, node (4 bytes, big-endian). It removes the entries whose record
// is gone or now carries another seq, and returns how many.
const seqTrimLua = `
local n = redis.call('ZCARD', KEYS[1])
local start = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if start >= n then start = 0 end
local limit = tonumber(ARGV[2])
local ms = redis.call('ZRANGE', KEYS[1], start, start + limit - 1, 'WITHSCORES')
local removed = 0
for i = 1, #ms, 2 do
  local m, sc = ms[i], ms[i + 1]
  local v = redis.call('GET', ARGV[1] .. m)
  if not v or string.sub(v, 27, 38) ~= ARGV[3] .. struct.pack('>I4I4', math.floor(tonumber(sc) / 4294967296), tonumber(sc) % 4294967296) then
    redis.call('ZREM', KEYS[1], m)
    removed = removed + 1
  end
end
local next = start + #ms / 2 - removed
if next >= n - removed then next = 0 end
if next == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], next)
end
return removed
`

// formatLua: KEYS format key; ARGV layout. Writes the layout version into
// a new keyspace and returns the version found.
const formatLua = `
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`

// script is a Lua script and its SHA-1, for EVALSHA.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

var (
	scriptClaim    = newScript("claim", claimLua)
	scriptComplete = newScript("complete", completeLua)
	scriptRelease  = newScript("release", releaseLua)
	scriptCount    = newScript("count", countLua)
	scriptReserve  = newScript("reserve", reserveLua)
	scriptPending  = newScript("pending", pendingLua)
	scriptTrim     = newScript("trim", trimLua)
	scriptPurge    = newScript("purge", purgeLua)
	scriptFormat   = newScript("format", formatLua)
	scriptClaimNew = newScript("claim new", claimNewLua)
	scriptSeq      = newScript("seq", seqLua)
	scriptSeqTrim  = newScript("seq trim", seqTrimLua)

	allScripts = []*script{scriptClaim, scriptComplete, scriptRelease, scriptCount, scriptReserve, scriptPending, scriptTrim, scriptPurge, scriptFormat,
		scriptClaimNew, scriptSeq, scriptSeqTrim}
)
