-- SPDX-License-Identifier: BSD-3-Clause
--
-- A Wireshark dissector for kvss (docs/PROTOCOL.md): every message type of
-- sections 2, 3 and 9, on the protocol's UDP ports (7400 control, 7401
-- EVICT_DATA, 7402 REFILL_DATA; preferences change them). A frame that is
-- not a valid KVSS message is marked with the reason kvss-dump gives
-- (kvss.error, and an expert note), checked in kvss-dump's order.
--
--   tshark -X lua_script:tools/wireshark/kvss.lua -r pcap/every_type.pcap -V
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- Field names are kvss-dump --json's keys (kvss.prompt_id, kvss.batch_no,
-- ...), so that the two decoders can be compared field by field
-- (scripts/test-wireshark.sh does, on every capture in pcap/).

local kvss = Proto("kvss", "KV storage shards (kvss)")

kvss.prefs.ctrl = Pref.uint("Control port", 7400, "UDP port of control messages")
kvss.prefs.evict = Pref.uint("EVICT_DATA port", 7401, "UDP port of EVICT_DATA")
kvss.prefs.refill = Pref.uint("REFILL_DATA port", 7402, "UDP port of REFILL_DATA")

local TYPES = {
	[0x01] = "HELLO", [0x02] = "RESERVE", [0x03] = "EVICT", [0x04] = "REFILL",
	[0x05] = "DELETE", [0x06] = "L2_DOWN", [0x07] = "L2_UP", [0x08] = "L2_DELETE", [0x09] = "REPORT_ACK",
	[0x0A] = "SH_DOWN", [0x0B] = "SH_UP",
	[0x10] = "STATUS", [0x11] = "ACK", [0x12] = "ERROR", [0x13] = "REFILL_DONE",
	[0x14] = "TOKEN_LOST", [0x15] = "L2_DONE", [0x16] = "L2_INVENTORY",
	[0x20] = "EVICT_DATA", [0x21] = "REFILL_DATA",
}
local CODES = {
	[0] = "OK", [1] = "HOLE", [2] = "LEFT_GROWTH", [3] = "DELETE_NOT_RIGHT",
	[4] = "UNKNOWN_PROMPT", [5] = "RANGE", [6] = "NO_SPACE", [7] = "MALFORMED",
	[8] = "BAD_CACHE", [9] = "NO_TIER", [10] = "L2_FAILED", [11] = "SHARED_FAILED",
	[12] = "SHARED_BAD", [13] = "SHARED_KEY",
}
local PAYLOAD_MAX = 9600 - 20 - 8

-- One ProtoField per kvss-dump key; its width on the wire.
local F = {}
local function uint(name, bits)
	local mk = ({[8] = ProtoField.uint8, [16] = ProtoField.uint16, [32] = ProtoField.uint32,
		     [64] = ProtoField.uint64})[bits]
	F[name] = mk("kvss." .. name, name, base.DEC)
end
local function str(name)
	F[name] = ProtoField.string("kvss." .. name, name)
end
str("type"); str("error"); str("code_name"); str("status_name"); str("op")
uint("version", 8); uint("flags", 16); uint("model_id", 32); uint("shard_id", 16)
uint("count", 16); uint("epoch", 32); uint("seq", 64)
for _, n in ipairs({"prompt_id", "continue_id", "batch_no", "refill_id", "evict_count",
		    "batches_complete", "last_seq_done", "reports", "uptime_ns", "capacity_tokens",
		    "stored_tokens", "prompts", "cum_seq", "bytes", "key", "parent", "isolation_id",
		    "first_use_ns", "recv_seq", "l2_capacity_tokens", "l2_stored_tokens",
		    "object_id"}) do
	uint(n, 64)
end
for _, n in ipairs({"start_token_idx", "num_tokens", "token", "token_idx", "sequence_id",
		    "cache_idx", "end_token_idx", "status_flags", "driver_epoch", "bytes_per_token",
		    "tokens", "stream_offset", "stream_len", "payload_len", "total", "first",
		    "gen_global", "gen_org", "layout"}) do
	uint(n, 32)
end
for _, n in ipairs({"cache_id", "num_caches", "g", "ncols", "num_chunks", "num_buffers", "code",
		    "status", "buffer_id"}) do
	uint(n, 16)
end
local list = {}
for _, f in pairs(F) do
	list[#list + 1] = f
end
kvss.fields = list

local e_malformed = ProtoExpert.new("kvss.malformed", "Not a valid KVSS message",
				    expert.group.MALFORMED, expert.severity.ERROR)
kvss.experts = {e_malformed}

-- What the lower layers said, for kvss-dump's checks of the frame.
local f_ip = Field.new("ip")
local f_ip_hdr_len = Field.new("ip.hdr_len")
local f_ip_len = Field.new("ip.len")
local f_ip_src = Field.new("ip.src")
local f_ip_dst = Field.new("ip.dst")
local f_ip_mf = Field.new("ip.flags.mf")
local f_ip_frag = Field.new("ip.frag_offset")
local f_udp = Field.new("udp")
local f_udp_len = Field.new("udp.length")
local f_udp_cksum = Field.new("udp.checksum")
local f_vlan = Field.new("vlan.id")
local f_caplen = Field.new("frame.cap_len")

-- The 16-bit one's complement sum of @r's bytes, added to @sum.
local function csum(r, sum)
	local n = r:len()
	local i = 0
	while i + 1 < n do
		sum = sum + r(i, 2):uint()
		i = i + 2
	end
	if i < n then
		sum = sum + r(i, 1):uint() * 256
	end
	while sum > 0xffff do
		sum = sum % 65536 + math.floor(sum / 65536)
	end
	return sum
end

local function frame_reason(tvb)
	if select("#", f_vlan()) > 1 then
		return "vlan_stacked"
	end
	local hl = f_ip_hdr_len()
	if hl and hl.value ~= 20 then
		return "ip_options"
	end
	local ip = f_ip()
	if ip and ip.range:len() >= 20 and csum(ip.range:range(0, 20), 0) ~= 0xffff then
		return "bad_ip_checksum"
	end
	local tot, cap = f_ip_len(), f_caplen()
	if ip and tot and cap and ip.range:offset() + tot.value > cap.value then
		return "truncated" -- the IPv4 total length runs past the bytes captured
	end
	if tvb:len() < tvb:reported_len() then
		return "truncated"
	end
	local mf, fo = f_ip_mf(), f_ip_frag()
	if (mf and mf.value) or (fo and fo.value ~= 0) then
		return "ip_fragment"
	end
	local ulen = f_udp_len()
	if ulen and tot and ulen.value ~= tot.value - 20 then
		return "bad_udp_len"
	end
	local ck, udp = f_udp_cksum(), f_udp()
	if ck and ck.value ~= 0 and udp then
		local src, dst = f_ip_src().range, f_ip_dst().range
		local sum = csum(src, 0)
		sum = csum(dst, sum)
		sum = sum + 17 + ulen.value
		sum = csum(udp.range:range(0, 8), sum)
		sum = csum(tvb:range(0), sum)
		if sum ~= 0xffff then
			return "bad_udp_checksum"
		end
	end
	return nil
end

-- Body checks of sections 3 and 9 (the parser's, lib/proto/proto.c).
local function unless(ok, reason)
	if ok then
		return nil
	end
	return reason
end

-- The version of the frame being decoded: 2, or 1 (a capture made before
-- protocol v2; docs/PROTOCOL.md lists what changed).
local ver = 2

local function records(body_len, count, len)
	return count * len == body_len
end

local function body_reason(t, b, body_len, count)
	local n = TYPES[t]
	if n == "HELLO" then
		if count ~= 0 then return "bad_count" end
		return unless(body_len == 0, "bad_body_len")
	elseif n == "ACK" or n == "REPORT_ACK" then
		if count ~= 0 then return "bad_count" end
		return unless(body_len == 16, "bad_body_len")
	elseif n == "RESERVE" or n == "DELETE" or n == "ERROR" then
		return unless(records(body_len, count, 32), "bad_count")
	elseif n == "REFILL_DONE" or n == "L2_DONE" then
		return unless(records(body_len, count, 24), "bad_count")
	elseif n == "TOKEN_LOST" then
		return unless(records(body_len, count, ver == 1 and 16 or 24), "bad_count")
	elseif n == "L2_DOWN" then
		return unless(records(body_len, count, 64), "bad_count")
	elseif n == "SH_DOWN" then
		return unless(records(body_len, count, 88), "bad_count")
	elseif n == "L2_DELETE" then
		return unless(records(body_len, count, 32), "bad_count")
	elseif n == "L2_INVENTORY" then
		if body_len < 16 then return "bad_body_len" end
		return unless(records(body_len - 16, count, 64), "bad_count")
	elseif n == "EVICT" or n == "L2_UP" or n == "SH_UP" then
		if body_len < 16 then return "bad_body_len" end
		local nc, g = b(8, 2):le_uint(), b(10, 2):le_uint()
		if nc * g ~= count then return "bad_count" end
		local cols = n ~= "EVICT" and b(12, 2):le_uint() or 0
		return unless(count * 16 + cols * (n == "SH_UP" and 88 or 64) == body_len - 16, "bad_count")
	elseif n == "REFILL" then
		local off, k = 0, 0
		while off < body_len do
			if off + 32 > body_len then return "bad_count" end
			off = off + 32 + b(off + 26, 2):le_uint() * 16
			k = k + 1
		end
		return unless((off == body_len and k == count), "bad_count")
	elseif n == "STATUS" then
		if body_len < 32 then return "bad_body_len" end
		return unless(records(body_len - 32, count, ver == 1 and 32 or 48), "bad_count")
	end
	return "bad_type"
end

local function u(tree, name, r)
	tree:add_le(F[name], r)
end

local function l2col(tree, r)
	local shared = r:len() == 88
	local t = tree:add(kvss, r, shared and "SharedColumn" or "L2Column")
	u(t, "key", r(0, 8)); u(t, "parent", r(8, 8)); u(t, "isolation_id", r(16, 8))
	u(t, "prompt_id", r(24, 8)); u(t, "evict_count", r(32, 8)); u(t, "first_use_ns", r(40, 8))
	u(t, "start_token_idx", r(48, 4)); u(t, "num_tokens", r(52, 4)); u(t, "cache_id", r(56, 2))
	if shared then
		u(t, "object_id", r(64, 8)); u(t, "gen_global", r(72, 4)); u(t, "gen_org", r(76, 4))
		u(t, "layout", r(80, 4))
	end
end

local function evict_batch(tree, b, n, count)
	local nc = b(8, 2):le_uint()
	u(tree, "batch_no", b(0, 8)); u(tree, "num_caches", b(8, 2)); u(tree, "g", b(10, 2))
	if n == "L2_UP" or n == "SH_UP" then u(tree, "ncols", b(12, 2)) end
	for i = 0, count - 1 do
		local r = b(16 + 16 * i, 16)
		local t = tree:add(kvss, r, "EvictEntry " .. i)
		t:add(F.token, r, math.floor(i / nc)); t:add(F.cache_id, r, i % nc)
		u(t, "prompt_id", r(0, 8)); u(t, "token_idx", r(8, 4)); u(t, "sequence_id", r(12, 4))
	end
end

-- The body, field by field, in kvss-dump's order.
local function body(tree, t, b, count)
	local n = TYPES[t]
	if n == "RESERVE" then
		for i = 0, count - 1 do
			local r = b(32 * i, 32)
			local s = tree:add(kvss, r, "ReserveRecord " .. i)
			u(s, "prompt_id", r(0, 8)); u(s, "continue_id", r(8, 8))
			u(s, "start_token_idx", r(16, 4)); u(s, "num_tokens", r(20, 4)); u(s, "cache_id", r(24, 2))
		end
	elseif n == "EVICT" then
		evict_batch(tree, b, n, count)
	elseif n == "REFILL" then
		local off = 0
		for i = 0, count - 1 do
			local r = b(off, 32)
			local nch = r(26, 2):le_uint()
			local s = tree:add(kvss, b(off, 32 + 16 * nch), "RefillRequest " .. i)
			u(s, "refill_id", r(0, 8)); u(s, "evict_count", r(8, 8)); u(s, "sequence_id", r(16, 4))
			u(s, "cache_idx", r(20, 4)); u(s, "cache_id", r(24, 2)); u(s, "num_chunks", r(26, 2))
			for j = 0, nch - 1 do
				local c = b(off + 32 + 16 * j, 16)
				local ct = s:add(kvss, c, "RefillChunk " .. j)
				u(ct, "prompt_id", c(0, 8)); u(ct, "start_token_idx", c(8, 4)); u(ct, "num_tokens", c(12, 4))
			end
			off = off + 32 + 16 * nch
		end
	elseif n == "DELETE" then
		for i = 0, count - 1 do
			local r = b(32 * i, 32)
			local s = tree:add(kvss, r, "DeleteRecord " .. i)
			u(s, "prompt_id", r(0, 8)); u(s, "evict_count", r(8, 8)); u(s, "start_token_idx", r(16, 4))
			u(s, "end_token_idx", r(20, 4)); u(s, "cache_id", r(24, 2))
		end
	elseif n == "L2_DOWN" then
		for i = 0, count - 1 do l2col(tree, b(64 * i, 64)) end
	elseif n == "SH_DOWN" then
		for i = 0, count - 1 do l2col(tree, b(88 * i, 88)) end
	elseif n == "L2_UP" or n == "SH_UP" then
		local w = n == "SH_UP" and 88 or 64
		evict_batch(tree, b, n, count)
		for i = 0, b(12, 2):le_uint() - 1 do l2col(tree, b(16 + 16 * count + w * i, w)) end
	elseif n == "L2_DELETE" then
		for i = 0, count - 1 do
			local r = b(32 * i, 32)
			local s = tree:add(kvss, r, "L2Delete " .. i)
			u(s, "key", r(0, 8)); u(s, "isolation_id", r(8, 8)); u(s, "evict_count", r(16, 8))
			u(s, "cache_id", r(24, 2))
		end
	elseif n == "STATUS" then
		u(tree, "batches_complete", b(0, 8)); u(tree, ver == 1 and "last_seq_done" or "reports", b(8, 8))
		u(tree, "uptime_ns", b(16, 8)); u(tree, "status_flags", b(24, 4))
		u(tree, "driver_epoch", b(28, 4))
		local cl = ver == 1 and 32 or 48
		for i = 0, count - 1 do
			local r = b(32 + cl * i, cl)
			local s = tree:add(kvss, r, "CacheInfo " .. i)
			u(s, "cache_id", r(0, 2)); u(s, "num_buffers", r(2, 2)); u(s, "bytes_per_token", r(4, 4))
			u(s, "capacity_tokens", r(8, 8)); u(s, "stored_tokens", r(16, 8)); u(s, "prompts", r(24, 8))
			if ver >= 2 then
				u(s, "l2_capacity_tokens", r(32, 8)); u(s, "l2_stored_tokens", r(40, 8))
			end
		end
	elseif n == "REPORT_ACK" then
		u(tree, "cum_seq", b(0, 8))
	elseif n == "ACK" then
		u(tree, "cum_seq", b(0, 8))
		if ver >= 2 then u(tree, "recv_seq", b(8, 8)) end
	elseif n == "ERROR" then
		for i = 0, count - 1 do
			local r = b(32 * i, 32)
			local s = tree:add(kvss, r, "ErrorRecord " .. i)
			local code = r(22, 2):le_uint()
			u(s, "seq", r(0, 8)); u(s, "prompt_id", r(8, 8)); u(s, "token_idx", r(16, 4))
			u(s, "cache_id", r(20, 2)); u(s, "code", r(22, 2))
			s:add(F.code_name, r(22, 2), CODES[code] or "UNKNOWN")
		end
	elseif n == "REFILL_DONE" then
		for i = 0, count - 1 do
			local r = b(24 * i, 24)
			local s = tree:add(kvss, r, "RefillDone " .. i)
			u(s, "refill_id", r(0, 8)); u(s, "tokens", r(8, 4)); u(s, "status", r(12, 2))
			u(s, "bytes", r(16, 8))
		end
	elseif n == "TOKEN_LOST" then
		local ll = ver == 1 and 16 or 24
		for i = 0, count - 1 do
			local r = b(ll * i, ll)
			local s = tree:add(kvss, r, "LostRecord " .. i)
			u(s, "prompt_id", r(0, 8)); u(s, "token_idx", r(8, 4))
			if ver >= 2 then
				u(s, "tokens", r(12, 4)); u(s, "cache_id", r(16, 2))
			else
				u(s, "cache_id", r(12, 2))
			end
		end
	elseif n == "L2_DONE" then
		for i = 0, count - 1 do
			local r = b(24 * i, 24)
			local s = tree:add(kvss, r, "L2Done " .. i)
			local op, st = r(18, 1):uint(), r(20, 2):le_uint()
			u(s, "key", r(0, 8)); u(s, "isolation_id", r(8, 8)); u(s, "cache_id", r(16, 2))
			s:add(F.op, r(18, 1), op == 1 and "L2_DOWN" or op == 2 and "L2_UP" or
			      op == 3 and "SH_DOWN" or op == 4 and "SH_UP" or op == 5 and "L2_GONE" or "UNKNOWN")
			u(s, "status", r(20, 2))
			s:add(F.status_name, r(20, 2), CODES[st] or "UNKNOWN")
		end
	elseif n == "L2_INVENTORY" then
		u(tree, "total", b(0, 4)); u(tree, "first", b(4, 4))
		for i = 0, count - 1 do l2col(tree, b(16 + 64 * i, 64)) end
	end
end

local function mark(tree, pinfo, tvb, reason)
	local t = tree:add(kvss, tvb:range(0), "KVSS (dropped: " .. reason .. ")")
	t:add(F.error, tvb:range(0, 0), reason)
	t:add_proto_expert_info(e_malformed, "dropped: " .. reason)
	pinfo.cols.protocol = "KVSS"
	pinfo.cols.info = "dropped: " .. reason
end

function kvss.dissector(tvb, pinfo, tree)
	local reason = frame_reason(tvb)
	if reason then return mark(tree, pinfo, tvb, reason) end
	local plen = tvb:len()
	if plen < 32 then return mark(tree, pinfo, tvb, "truncated") end
	if tvb(0, 4):string() ~= "KVSS" then return mark(tree, pinfo, tvb, "bad_magic") end
	ver = tvb(4, 1):uint()
	if ver ~= 1 and ver ~= 2 then return mark(tree, pinfo, tvb, "bad_version") end
	local t = tvb(5, 1):uint()
	local name = TYPES[t]
	if not name then return mark(tree, pinfo, tvb, "bad_type") end
	local dport = pinfo.dst_port
	local want = t == 0x20 and kvss.prefs.evict or t == 0x21 and kvss.prefs.refill or kvss.prefs.ctrl
	if dport ~= want then return mark(tree, pinfo, tvb, "wrong_port") end
	local count, body_len = tvb(14, 2):le_uint(), tvb(20, 4):le_uint()
	if body_len ~= plen - 32 then return mark(tree, pinfo, tvb, "bad_body_len") end
	local b = body_len > 0 and tvb(32, body_len) or nil
	if t >= 0x20 then
		local hl = t == 0x20 and 24 or 32
		if count ~= 0 then return mark(tree, pinfo, tvb, "bad_count") end
		if body_len < hl then return mark(tree, pinfo, tvb, "bad_body_len") end
		local so = t == 0x20 and b(12, 4):le_uint() or b(20, 4):le_uint()
		local sl = t == 0x20 and b(16, 4):le_uint() or b(24, 4):le_uint()
		if so + body_len - hl > sl then return mark(tree, pinfo, tvb, "bad_data_range") end
	else
		if body_len > PAYLOAD_MAX then return mark(tree, pinfo, tvb, "bad_body_len") end
		reason = body_reason(t, b, body_len, count)
		if reason then return mark(tree, pinfo, tvb, reason) end
	end

	pinfo.cols.protocol = "KVSS"
	pinfo.cols.info = name .. " seq=" .. tostring(tvb(24, 8):le_uint64())
	local tr = tree:add(kvss, tvb:range(0), "KVSS " .. name)
	tr:add(F.type, tvb(5, 1), name)
	u(tr, "version", tvb(4, 1)); u(tr, "flags", tvb(6, 2)); u(tr, "model_id", tvb(8, 4))
	u(tr, "shard_id", tvb(12, 2)); u(tr, "count", tvb(14, 2)); u(tr, "epoch", tvb(16, 4))
	u(tr, "seq", tvb(24, 8))
	if t == 0x20 then
		u(tr, "batch_no", b(0, 8)); u(tr, "cache_id", b(8, 2)); u(tr, "stream_offset", b(12, 4))
		u(tr, "stream_len", b(16, 4))
		if ver >= 2 then u(tr, "driver_epoch", b(20, 4)) end
		tr:add(F.payload_len, b(0, 0), body_len - 24)
	elseif t == 0x21 then
		u(tr, "refill_id", b(0, 8)); u(tr, "sequence_id", b(8, 4)); u(tr, "cache_idx", b(12, 4))
		u(tr, "cache_id", b(16, 2)); u(tr, "buffer_id", b(18, 2)); u(tr, "stream_offset", b(20, 4))
		u(tr, "stream_len", b(24, 4)); tr:add(F.payload_len, b(0, 0), body_len - 32)
	elseif b then
		body(tr, t, b, count)
	end
end

local function register()
	local udp = DissectorTable.get("udp.port")
	for _, p in ipairs({kvss.prefs.ctrl, kvss.prefs.evict, kvss.prefs.refill}) do
		udp:add(p, kvss)
	end
end
register()
function kvss.prefs_changed()
	register()
end
