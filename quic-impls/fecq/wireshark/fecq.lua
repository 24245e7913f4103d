-- Wireshark / tshark dissector for fecq's FEC framing (crates/fec-core/src/frame.rs), so that a packet
-- capture of a fecq run with FEC shows its QUIC packets: every datagram of a FEC scheme starts with one
-- byte `kind << 4 | ecn`, then a source symbol id (source: the QUIC packet follows, handed to Wireshark's
-- QUIC dissector), nothing (plain: a QUIC packet fecq did not protect, `--fec-protect stream`'s handshake,
-- ACK-only and control packets; handed on likewise) or a repair's header and data. Runs without FEC
-- (`fec = "none"`) send plain QUIC.
--
--   tshark -X lua_script:quic-impls/fecq/wireshark/fecq.lua -d udp.port==PORT,fecq -r run.pcapng -Y quic
--
-- (Wireshark: copy it into the personal Lua plugins folder, then Decode As… fecq on the run's port.)

local fecq = Proto("fecq", "fecq FEC framing")

local kinds = { [1] = "source", [2] = "XOR repair", [3] = "Reed-Solomon repair", [4] = "RLC repair",
                [5] = "plain" }
local f = {
    kind = ProtoField.uint8("fecq.kind", "Kind", base.DEC, kinds, 0xf0),
    ecn = ProtoField.uint8("fecq.ecn", "ECN", base.DEC, nil, 0x03),
    symbol = ProtoField.uint32("fecq.symbol", "Source symbol id"),
    first = ProtoField.uint32("fecq.first", "First source symbol id"),
    count = ProtoField.uint8("fecq.count", "Source symbols covered"),
    stride = ProtoField.uint8("fecq.stride", "Stride"),
    k = ProtoField.uint8("fecq.k", "Source symbols per block (k)"),
    r = ProtoField.uint8("fecq.r", "Repair symbols per block (r)"),
    index = ProtoField.uint8("fecq.index", "Repair index"),
    repair_id = ProtoField.uint32("fecq.repair_id", "Repair id"),
    data = ProtoField.bytes("fecq.repair_data", "Repair data"),
}
fecq.fields = { f.kind, f.ecn, f.symbol, f.first, f.count, f.stride, f.k, f.r, f.index, f.repair_id, f.data }

local quic = Dissector.get("quic")
-- header length per kind (frame.rs: SOURCE_HEADER, XOR_, RS_, RLC_REPAIR_HEADER, PLAIN_HEADER)
local header = { [1] = 5, [2] = 7, [3] = 8, [4] = 10, [5] = 1 }

function fecq.dissector(tvb, pinfo, tree)
    if tvb:len() < 1 then return 0 end
    local first = tvb(0, 1):uint()
    local kind = math.floor(first / 16)
    local reserved = math.floor(first / 4) % 4
    if header[kind] == nil or reserved ~= 0 or tvb:len() < header[kind] then
        return quic:call(tvb, pinfo, tree)   -- not fecq's framing: plain QUIC
    end
    local sub = tree:add(fecq, tvb(0, header[kind]), "fecq " .. kinds[kind])
    sub:add(f.kind, tvb(0, 1))
    if kind == 1 or kind == 5 then
        sub:add(f.ecn, tvb(0, 1))
        if kind == 1 then
            sub:add(f.symbol, tvb(1, 4))
        end
        if tvb:len() > header[kind] then
            quic:call(tvb(header[kind]):tvb(), pinfo, tree)
        end
        return tvb:len()
    end
    if kind == 2 then
        sub:add(f.first, tvb(1, 4)); sub:add(f.count, tvb(5, 1)); sub:add(f.stride, tvb(6, 1))
    elseif kind == 3 then
        sub:add(f.first, tvb(1, 4)); sub:add(f.k, tvb(5, 1)); sub:add(f.r, tvb(6, 1)); sub:add(f.index, tvb(7, 1))
    else
        sub:add(f.repair_id, tvb(1, 4)); sub:add(f.first, tvb(5, 4)); sub:add(f.count, tvb(9, 1))
    end
    if tvb:len() > header[kind] then
        sub:add(f.data, tvb(header[kind]))
    end
    pinfo.cols.protocol = "fecq"
    pinfo.cols.info = "fecq " .. kinds[kind]
    return tvb:len()
end

DissectorTable.get("udp.port"):add_for_decode_as(fecq)
