#!/usr/bin/python3
"""Generate an independent RoCEv2 decoding fixture with Debian's scapy.

Run from the module root with Debian's interpreter (python3-scapy is installed
for /usr/bin/python3, not for any pyenv python):

    /usr/bin/python3 testdata/scapy/gen_fixtures.py

Writes, next to this script:

  scapy_fixtures.pcap   classic pcap, link type Ethernet, fixed timestamps
  scapy_fixtures.jsonl  one JSON object per RoCEv2 frame, with the field values
                        scapy reports when it re-dissects the frames it wrote

The output is deterministic: no clock, no randomness, payloads are fixed
byte patterns.

scapy.contrib.roce (scapy 2.5.0 as packaged by Debian 12) knows BTH, AETH and
the CNP body, and computes the ICRC for IPv4 only. The other extension headers
(RETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH, FETH) are defined below from
the IBA layouts (docs: protocol.md section 1.5), and the IPv6 ICRC is computed
with scapy's layer objects by masking fields the same way the IPv4 path does.
Every ICRC is cross-checked against a byte-level implementation of
protocol.md section 2 written from scratch here.
"""

import json
import os
import struct
import sys
import zlib

import scapy
from scapy.compat import raw
from scapy.fields import BitField, IntField, XIntField, XLongField
from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers
from scapy.utils import rdpcap, wrpcap
from scapy.contrib.roce import AETH, BTH, CNPPadding

HERE = os.path.dirname(os.path.abspath(__file__))
# GORXE_FIXTURE_DIR redirects the output (the Go test that checks that this
# script still reproduces the committed files uses it).
OUT = os.environ.get("GORXE_FIXTURE_DIR", HERE)
PCAP = os.path.join(OUT, "scapy_fixtures.pcap")
JSONL = os.path.join(OUT, "scapy_fixtures.jsonl")

ROCE_PORT = 4791
PMTU = 256
T0 = 1700000000  # fixed capture time of frame 1 (seconds)


# ---------------------------------------------------------------------------
# Extension headers scapy 2.5.0 does not define (IBA 9.3; all big-endian).
# ---------------------------------------------------------------------------

class _ChainedHeader(Packet):
    """Chooses the next header from the BTH opcode found below this layer."""

    def guess_payload_class(self, payload):
        return _next_header(self)

    def extract_padding(self, s):
        return s, None


class RETH(_ChainedHeader):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   IntField("dma_len", 0)]


class AtomicETH(_ChainedHeader):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   XLongField("swap_add", 0), XLongField("compare", 0)]


class AtomicAckETH(_ChainedHeader):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


class ImmDt(_ChainedHeader):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class IETH(_ChainedHeader):
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


class DETH(_ChainedHeader):
    name = "DETH"
    fields_desc = [XIntField("qkey", 0), BitField("resv8", 0, 8),
                   BitField("src_qp", 0, 24)]


class FETH(_ChainedHeader):
    name = "FETH"
    fields_desc = [BitField("resv", 0, 26), BitField("sel", 0, 2),
                   BitField("plt", 0, 4)]


# opcode -> (kernel name without IB_OPCODE_, header chain after BTH, payload rule)
# payload rule: "pmtu" (= PMTU), "last" (1..PMTU), "only" (0..PMTU),
# "none" (no payload), "eight" (exactly 8 bytes).
_OPS = {
    0x00: ("SEND_FIRST", [], "pmtu"),
    0x01: ("SEND_MIDDLE", [], "pmtu"),
    0x02: ("SEND_LAST", [], "last"),
    0x03: ("SEND_LAST_WITH_IMMEDIATE", [ImmDt], "last"),
    0x04: ("SEND_ONLY", [], "only"),
    0x05: ("SEND_ONLY_WITH_IMMEDIATE", [ImmDt], "only"),
    0x06: ("RDMA_WRITE_FIRST", [RETH], "pmtu"),
    0x07: ("RDMA_WRITE_MIDDLE", [], "pmtu"),
    0x08: ("RDMA_WRITE_LAST", [], "last"),
    0x09: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", [ImmDt], "last"),
    0x0A: ("RDMA_WRITE_ONLY", [RETH], "only"),
    0x0B: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", [RETH, ImmDt], "only"),
    0x0C: ("RDMA_READ_REQUEST", [RETH], "none"),
    0x0D: ("RDMA_READ_RESPONSE_FIRST", [AETH], "pmtu"),
    0x0E: ("RDMA_READ_RESPONSE_MIDDLE", [], "pmtu"),
    0x0F: ("RDMA_READ_RESPONSE_LAST", [AETH], "last"),
    0x10: ("RDMA_READ_RESPONSE_ONLY", [AETH], "only"),
    0x11: ("ACKNOWLEDGE", [AETH], "none"),
    0x12: ("ATOMIC_ACKNOWLEDGE", [AETH, AtomicAckETH], "none"),
    0x13: ("COMPARE_SWAP", [AtomicETH], "none"),
    0x14: ("FETCH_ADD", [AtomicETH], "none"),
    0x16: ("SEND_LAST_WITH_INVALIDATE", [IETH], "last"),
    0x17: ("SEND_ONLY_WITH_INVALIDATE", [IETH], "only"),
    0x1C: ("FLUSH", [FETH, RETH], "none"),
    0x1D: ("ATOMIC_WRITE", [RETH], "eight"),
}
OPCODES = {}
for _op, (_n, _h, _r) in _OPS.items():
    OPCODES[_op] = ("RC_" + _n, _h, _r)
    if _op <= 0x0B:
        OPCODES[0x20 | _op] = ("UC_" + _n, _h, _r)
OPCODES[0x64] = ("UD_SEND_ONLY", [DETH], "only")
OPCODES[0x65] = ("UD_SEND_ONLY_WITH_IMMEDIATE", [DETH, ImmDt], "only")
OPCODES[0x81] = ("CNP", [CNPPadding], "none")


def _bth_below(layer):
    u = layer.underlayer
    while u is not None and not isinstance(u, BTH):
        u = u.underlayer
    return u


def _next_header(layer):
    bth = _bth_below(layer)
    if bth is not None and bth.opcode in OPCODES:
        chain = OPCODES[bth.opcode][1]
        for i, cls in enumerate(chain):
            if type(layer) is cls and i + 1 < len(chain):
                return chain[i + 1]
    return Raw


# scapy binds BTH->AETH only for ACKNOWLEDGE and never looks past AETH; route
# AETH's payload through the same opcode table (needed for ATOMIC_ACKNOWLEDGE).
AETH.guess_payload_class = lambda self, payload: _next_header(self)
for _op, (_n, _chain, _r) in OPCODES.items():
    if _chain and _op not in (0x11, 0x81):  # those two scapy binds itself
        bind_layers(BTH, _chain[0], opcode=_op)


# ---------------------------------------------------------------------------
# ICRC
# ---------------------------------------------------------------------------

def icrc_bytes_independent(ip_to_end):
    """protocol.md section 2, byte level: ip_to_end = IP header .. ICRC incl."""
    b = bytearray(ip_to_end[:-4])
    if b[0] >> 4 == 4:
        ihl = (b[0] & 0x0F) * 4
        b[1] = 0xFF              # TOS
        b[8] = 0xFF              # TTL
        b[10:12] = b"\xff\xff"   # header checksum
    else:
        ihl = 40
        b[0] |= 0x0F             # traffic class (low nibble) ...
        b[1:4] = b"\xff\xff\xff"  # ... and flow label
        b[7] = 0xFF              # hop limit
    b[ihl + 6:ihl + 8] = b"\xff\xff"  # UDP checksum
    b[ihl + 8 + 4] = 0xFF             # BTH FECN/BECN/resv6
    return zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF


def icrc_scapy_v6(pkt):
    """ICRC of an Ether/IPv6/UDP/BTH packet, masking scapy fields the way
    scapy.contrib.roce masks them for IPv4 (scapy 2.5.0 has no IPv6 path)."""
    ip = pkt[IPv6].copy()
    ip.tc = 0xFF
    ip.fl = 0xFFFFF
    ip.hlim = 0xFF
    ip[UDP].chksum = 0xFFFF
    bth = ip[BTH]
    bth.fecn, bth.becn, bth.resv6 = 1, 1, 0x3F
    bth.icrc = 0  # 4-byte placeholder, excluded below
    return zlib.crc32(b"\xff" * 8 + raw(ip)[:-4]) & 0xFFFFFFFF


def icrc_scapy(pkt):
    """ICRC as scapy computes it, for a (re-)dissected Ether/IP*/UDP/BTH."""
    if IPv6 in pkt:
        return icrc_scapy_v6(pkt)
    p = pkt.copy()
    p[BTH].icrc = None  # scapy recomputes in BTH.post_build
    b = raw(p[IP])
    return struct.unpack("<I", b[p[IP].ihl * 4 + 8:][-4:])[0]


def _wire_field(crc):
    """Value of scapy's big-endian BTH.icrc field for a CRC value."""
    return struct.unpack(">I", struct.pack("<I", crc))[0]


def self_test():
    """The public vectors of protocol.md 2.5 and 2.6, through both paths."""
    cnp = bytes.fromhex(
        "e41d2dab2bc27cfe90643b320800"
        "45c2003c718c400040119161" "0a001101" "0a001201"
        "000012b700280000" "8100ffff4000011800000000" + "00" * 16 + "82fd002a")
    assert icrc_bytes_independent(cnp[14:]) == 0x2A00FD82
    assert icrc_scapy(Ether(cnp)) == 0x2A00FD82
    assert Ether(cnp)[BTH].icrc == 0x82FD002A
    vecs = [
        "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca2"
        "2460ffff000000d300cf17104630818be28935d90e9a95505401be885e500000"
        "78f353f3",
        "6e21face002c11ff2022000000000000000000000000102320230000000000000000"
        "000000001024c00012b7002ce7c52460ffff000000d300cf17104630818be28935d9"
        "0e9a95505401be885e5000003e5b743b",
        "4500003c000140004011b741c0a8010ac0a80114c00012b700280000"
        "0c00ffff000000128012345600007f00000010000000123400001000fc01b259",
        "45000030000240004011b74cc0a80114c0a8010ac00112b7001c0000"
        "1100ffff00000011001234591f000001b6a1a55a",
        "45000034000340004011b747c0a8010ac0a80114c00012b700200000"
        "0430ffff000000128000000168656c6c6f00000073b63e95",
    ]
    for h in vecs:
        b = bytes.fromhex(h)
        want = struct.unpack("<I", b[-4:])[0]
        eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + (
            b"\x86\xdd" if b[0] >> 4 == 6 else b"\x08\x00")
        assert icrc_bytes_independent(b) == want, h
        assert icrc_scapy(Ether(eth + b)) == want, h


# ---------------------------------------------------------------------------
# Frame construction
# ---------------------------------------------------------------------------

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
V4_A, V4_B = "192.168.10.1", "192.168.10.2"
V6_A, V6_B = "fd00:4791::a", "fd00:4791::b"


def pattern(n, tag):
    return bytes(((tag * 37) + i * 13 + (i >> 8)) & 0xFF for i in range(n))


def roce(desc, op, payload=0, *, v6=False, rsp=False, sport=0xC0DE,
         ip=None, udp_csum=None, hdrs=(), **bth):
    """Build Ether/IP/UDP/BTH/hdrs/payload+pad. op: BTH opcode; payload: the
    payload length; ip: extra IP/IPv6 fields; udp_csum: None = real
    checksum, 0 = zero; hdrs: instances of the extension header layers."""
    name, chain, rule = OPCODES[op]
    assert [type(h) for h in hdrs] == chain, (desc, hdrs)
    assert {"pmtu": payload == PMTU, "last": 1 <= payload <= PMTU,
            "only": 0 <= payload <= PMTU, "none": payload == 0,
            "eight": payload == 8}[rule], (desc, payload)
    pad = (-payload) & 3
    src, dst = (V6_B, V6_A) if rsp and v6 else (V6_A, V6_B) if v6 else \
        (V4_B, V4_A) if rsp else (V4_A, V4_B)
    smac, dmac = (MAC_B, MAC_A) if rsp else (MAC_A, MAC_B)
    ipkw = dict(ip or {})
    if v6:
        ipkw.setdefault("hlim", 64)
        l3 = IPv6(src=src, dst=dst, **ipkw)
    else:
        ipkw.setdefault("ttl", 64)
        ipkw.setdefault("flags", "DF")
        l3 = IP(src=src, dst=dst, **ipkw)
    b = BTH(opcode=op, padcount=pad, **bth)
    if v6:
        b.icrc = 0
    p = Ether(src=smac, dst=dmac) / l3 / UDP(sport=sport, dport=ROCE_PORT,
                                             chksum=udp_csum) / b
    for h in hdrs:
        p = p / h
    if payload or pad:
        p = p / Raw(pattern(payload, len(FRAMES) + 1) + b"\0" * pad)
    if v6:
        p[BTH].icrc = _wire_field(icrc_scapy_v6(Ether(raw(p))))
    FRAMES.append((raw(p), desc))


def other(desc, frame_bytes):
    FRAMES.append((frame_bytes, desc))


FRAMES = []  # (bytes, description)
NEG = {}     # frame number -> kind of negative check


def build_all():
    A = dict  # shorthand for the ip= overrides
    # --- RC over IPv4: a SEND message crossing the PSN wrap, QP 0x000011 ---
    roce("RC SEND_FIRST PMTU, PSN 0xFFFFFE", 0x00, 256, dqpn=0x11, psn=0xFFFFFE)
    roce("RC SEND_MIDDLE PMTU, PSN 0xFFFFFF", 0x01, 256, dqpn=0x11, psn=0xFFFFFF)
    roce("RC SEND_LAST 37 B pad 3, PSN wraps to 0, SE AckReq", 0x02, 37,
         dqpn=0x11, psn=0, solicited=1, ackreq=1)
    roce("RC SEND_LAST_WITH_IMMEDIATE 38 B pad 2, SE", 0x03, 38, dqpn=0x11,
         psn=1, solicited=1, ackreq=1, hdrs=[ImmDt(imm=0xDEADBEEF)])
    roce("RC SEND_ONLY 0 B pad 0", 0x04, 0, dqpn=0x11, psn=2, ackreq=1)
    roce("RC SEND_ONLY 1 B pad 3, UDP csum 0", 0x04, 1, dqpn=0x11, psn=3,
         udp_csum=0)
    roce("RC SEND_ONLY 255 B pad 1, P_Key 0x8001", 0x04, 255, dqpn=0x11,
         psn=4, pkey=0x8001)
    roce("RC SEND_ONLY 256 B (=PMTU), TOS 0xB8 TTL 255", 0x04, 256,
         dqpn=0x11, psn=5, ackreq=1, ip=A(tos=0xB8, ttl=255))
    roce("RC SEND_ONLY_WITH_IMMEDIATE 5 B pad 3, SE", 0x05, 5, dqpn=0x11,
         psn=6, solicited=1, ackreq=1, hdrs=[ImmDt(imm=0x00000001)])
    # --- RC WRITE on QP 0xFFFFFE, a 600-byte message then ONLY variants ---
    roce("RC RDMA_WRITE_FIRST PMTU, RETH len 600, FECN", 0x06, 256,
         dqpn=0xFFFFFE, psn=0x7FFFFF, fecn=1,
         hdrs=[RETH(va=0x00007F1234560000, rkey=0x00ABCDEF, dma_len=600)])
    roce("RC RDMA_WRITE_MIDDLE PMTU, IPv4 no DF, ID 0xBEEF", 0x07, 256,
         dqpn=0xFFFFFE, psn=0x800000, ip=A(flags=0, id=0xBEEF))
    roce("RC RDMA_WRITE_LAST 88 B pad 0, AckReq", 0x08, 88, dqpn=0xFFFFFE,
         psn=0x800001, ackreq=1)
    roce("RC RDMA_WRITE_LAST_WITH_IMMEDIATE 1 B pad 3", 0x09, 1,
         dqpn=0xFFFFFE, psn=0x800002, solicited=1, ackreq=1,
         hdrs=[ImmDt(imm=0xFFFFFFFF)])
    roce("RC RDMA_WRITE_ONLY 0 B, RETH len 0", 0x0A, 0, dqpn=0xFFFFFE,
         psn=0x800003, ackreq=1, hdrs=[RETH(va=0, rkey=0, dma_len=0)])
    roce("RC RDMA_WRITE_ONLY 130 B pad 2, BECN", 0x0A, 130, dqpn=0xFFFFFE,
         psn=0x800004, becn=1, ackreq=1,
         hdrs=[RETH(va=0xFFFFFFFFFFFFFF00, rkey=0xFFFFFFFF, dma_len=130)])
    roce("RC RDMA_WRITE_ONLY_WITH_IMMEDIATE 7 B pad 1, SE", 0x0B, 7,
         dqpn=0xFFFFFE, psn=0x800005, solicited=1, ackreq=1,
         hdrs=[RETH(va=0x1000, rkey=0x42, dma_len=7), ImmDt(imm=0x12345678)])
    # --- RC READ of 700 bytes and its three responses, then ONLY responses ---
    roce("RC RDMA_READ_REQUEST RETH len 700", 0x0C, 0, dqpn=0x000100,
         psn=0xFFFFFF, ackreq=1,
         hdrs=[RETH(va=0x00007F0000002000, rkey=0x1234, dma_len=700)])
    roce("RC RDMA_READ_RESPONSE_FIRST PMTU, AETH 0x1F", 0x0D, 256, rsp=True,
         sport=0xE001, dqpn=0x000200, psn=0xFFFFFF,
         hdrs=[AETH(syndrome=0x1F, msn=0xFFFFFF)])
    roce("RC RDMA_READ_RESPONSE_MIDDLE PMTU (no AETH)", 0x0E, 256, rsp=True,
         sport=0xE001, dqpn=0x000200, psn=0)
    roce("RC RDMA_READ_RESPONSE_LAST 188 B pad 0", 0x0F, 188, rsp=True,
         sport=0xE001, dqpn=0x000200, psn=1,
         hdrs=[AETH(syndrome=0x1F, msn=0)])
    roce("RC RDMA_READ_RESPONSE_ONLY 0 B (FLUSH/ATOMIC_WRITE reply)", 0x10, 0,
         rsp=True, sport=0xE001, dqpn=0x000200, psn=2,
         hdrs=[AETH(syndrome=0x1F, msn=1)])
    roce("RC RDMA_READ_RESPONSE_ONLY 3 B pad 1, credits code 5", 0x10, 3,
         rsp=True, sport=0xE001, dqpn=0x000200, psn=3,
         hdrs=[AETH(syndrome=0x05, msn=2)])
    # --- RC ACK / RNR NAK / NAK (AETH syndromes, protocol.md 3.3) ---
    acks = [
        (0x1F, "ACK, credits invalid (0x1F)"), (0x00, "ACK, 0 credits"),
        (0x0E, "ACK, 128 credits (code 14)"),
        (0x20, "RNR NAK timer code 0 (655.36 ms)"),
        (0x2C, "RNR NAK timer code 12 (0.64 ms)"),
        (0x3F, "RNR NAK timer code 31"),
        (0x60, "NAK PSN sequence error"), (0x61, "NAK invalid request"),
        (0x62, "NAK remote access error"), (0x63, "NAK remote op error"),
    ]
    for i, (syn, what) in enumerate(acks):
        roce("RC ACKNOWLEDGE " + what, 0x11, 0, rsp=True, sport=0xE001,
             dqpn=0x000200, psn=0x123456 + i,
             hdrs=[AETH(syndrome=syn, msn=0x000100 + i)])
    roce("RC ATOMIC_ACKNOWLEDGE orig 0x0123456789ABCDEF", 0x12, 0, rsp=True,
         sport=0xE001, dqpn=0x000200, psn=0x200,
         hdrs=[AETH(syndrome=0x1F, msn=0x10),
               AtomicAckETH(orig=0x0123456789ABCDEF)])
    roce("RC COMPARE_SWAP", 0x13, 0, dqpn=0x000100, psn=0x200, ackreq=1,
         hdrs=[AtomicETH(va=0x00007F0000003008, rkey=0x5555,
                         swap_add=0xFEDCBA9876543210,
                         compare=0x1111111122222222)])
    roce("RC FETCH_ADD add 1", 0x14, 0, dqpn=0x000100, psn=0x201, ackreq=1,
         hdrs=[AtomicETH(va=0x00007F0000003010, rkey=0x5555, swap_add=1,
                         compare=0)])
    roce("RC SEND_LAST_WITH_INVALIDATE 2 B pad 2", 0x16, 2, dqpn=0x000100,
         psn=0x202, solicited=1, ackreq=1, hdrs=[IETH(rkey=0x00C0FFEE)])
    roce("RC SEND_ONLY_WITH_INVALIDATE 64 B pad 0", 0x17, 64, dqpn=0x000100,
         psn=0x203, ackreq=1, hdrs=[IETH(rkey=0x87654321)])
    roce("RC FLUSH FETH sel=1 plt=2 (whole MR, persistence)", 0x1C, 0,
         dqpn=0x000100, psn=0x204, ackreq=1,
         hdrs=[FETH(sel=1, plt=2), RETH(va=0, rkey=0x77, dma_len=0)])
    roce("RC ATOMIC_WRITE 8 B", 0x1D, 8, dqpn=0x000100, psn=0x205, ackreq=1,
         hdrs=[RETH(va=0x00007F0000004000, rkey=0x77, dma_len=8)])
    # --- RC over IPv6 (masked TC/flow label/hop limit, both UDP csums) ---
    V6X = A(tc=0x8A, fl=0xABCDE, hlim=255)
    roce("IPv6 RC SEND_FIRST PMTU, TC 0x8A FL 0xABCDE", 0x00, 256, v6=True,
         ip=V6X, dqpn=0xFFFFFF, psn=0xFFFFFF)
    roce("IPv6 RC SEND_LAST 17 B pad 3, UDP csum 0", 0x02, 17, v6=True,
         udp_csum=0, dqpn=0xFFFFFF, psn=0, ackreq=1)
    roce("IPv6 RC SEND_ONLY_WITH_IMMEDIATE 6 B pad 2, P_Key 0x7FFF", 0x05, 6,
         v6=True, ip=A(hlim=1), dqpn=0x123456, psn=0x10, pkey=0x7FFF,
         solicited=1, hdrs=[ImmDt(imm=0xCAFEF00D)])
    roce("IPv6 RC RDMA_WRITE_ONLY_WITH_IMMEDIATE 9 B pad 3", 0x0B, 9, v6=True,
         ip=V6X, dqpn=0x123456, psn=0x11, ackreq=1,
         hdrs=[RETH(va=0xDEAD0000BEEF0000, rkey=0x99, dma_len=9),
               ImmDt(imm=0x0BADF00D)])
    roce("IPv6 RC RDMA_READ_REQUEST", 0x0C, 0, v6=True, dqpn=0x123456,
         psn=0x12, ackreq=1, hdrs=[RETH(va=0x8000, rkey=0x99, dma_len=4096)])
    roce("IPv6 RC RDMA_READ_RESPONSE_LAST 255 B pad 1", 0x0F, 255, v6=True,
         rsp=True, sport=0xE002, udp_csum=0, dqpn=0x654321, psn=0x21,
         hdrs=[AETH(syndrome=0x1F, msn=0x3)])
    roce("IPv6 RC ACKNOWLEDGE RNR NAK code 1, FECN BECN", 0x11, 0, v6=True,
         rsp=True, sport=0xE002, ip=V6X, dqpn=0x654321, psn=0x13, fecn=1,
         becn=1, hdrs=[AETH(syndrome=0x21, msn=0xABCDEF)])
    roce("IPv6 RC ATOMIC_ACKNOWLEDGE", 0x12, 0, v6=True, rsp=True,
         sport=0xE002, dqpn=0x654321, psn=0x14,
         hdrs=[AETH(syndrome=0x1F, msn=0x4),
               AtomicAckETH(orig=0xFFFFFFFFFFFFFFFF)])
    roce("IPv6 RC FETCH_ADD", 0x14, 0, v6=True, dqpn=0x123456, psn=0x14,
         ackreq=1, hdrs=[AtomicETH(va=0x10, rkey=1,
                                   swap_add=0x8000000000000000, compare=0)])
    roce("IPv6 RC SEND_ONLY_WITH_INVALIDATE 3 B pad 1", 0x17, 3, v6=True,
         dqpn=0x123456, psn=0x15, ackreq=1, hdrs=[IETH(rkey=0xFFFFFFFF)])
    roce("IPv6 RC FLUSH FETH sel=0 plt=1", 0x1C, 0, v6=True, dqpn=0x123456,
         psn=0x16, ackreq=1,
         hdrs=[FETH(sel=0, plt=1), RETH(va=0x7000, rkey=0x99, dma_len=512)])
    roce("IPv6 RC ATOMIC_WRITE 8 B", 0x1D, 8, v6=True, dqpn=0x123456,
         psn=0x17, ackreq=1, hdrs=[RETH(va=0x7008, rkey=0x99, dma_len=8)])
    # --- UC 0x20..0x2B (MigReq=1 as rdmavt-based stacks send) ---
    uc = [
        (0x20, 256, [], "PMTU"), (0x21, 256, [], "PMTU"),
        (0x22, 10, [], "10 B pad 2"),
        (0x23, 11, [ImmDt(imm=0xA5A5A5A5)], "11 B pad 1"),
        (0x24, 18, [], "18 B pad 2"),
        (0x25, 0, [ImmDt(imm=0x5A5A5A5A)], "0 B"),
        (0x26, 256, [RETH(va=0x20000, rkey=0x3, dma_len=1000)], "PMTU"),
        (0x27, 256, [], "PMTU"), (0x28, 232, [], "232 B pad 0"),
        (0x29, 255, [ImmDt(imm=0x01020304)], "255 B pad 1"),
        (0x2A, 33, [RETH(va=0x30000, rkey=0x3, dma_len=33)], "33 B pad 3"),
        (0x2B, 4, [RETH(va=0x40000, rkey=0x3, dma_len=4),
                   ImmDt(imm=0x0)], "4 B pad 0"),
    ]
    for i, (op, n, hdrs, what) in enumerate(uc):
        v6 = op in (0x24, 0x2B)
        roce("%sUC %s %s, MigReq" % ("IPv6 " if v6 else "", OPCODES[op][0][3:],
                                     what), op, n, v6=v6, dqpn=0x800001,
             psn=0xFFFFFA + i if i < 6 else i - 6, migreq=1,
             solicited=1 if op in (0x22, 0x23, 0x24, 0x25, 0x29, 0x2B) else 0,
             pkey=0x1234, hdrs=hdrs)
    # --- UD ---
    roce("UD SEND_ONLY 100 B pad 0, GSI QP1 Q_Key 0x80010000", 0x64, 100,
         dqpn=1, psn=0x42, hdrs=[DETH(qkey=0x80010000, src_qp=1)])
    roce("UD SEND_ONLY_WITH_IMMEDIATE 21 B pad 3, QPN 0xFFFFFF", 0x65, 21,
         dqpn=0xFFFFFF, psn=0x43, solicited=1, ip=A(id=0, flags=0),
         hdrs=[DETH(qkey=0x11111111, src_qp=0xFFFFFE), ImmDt(imm=0x7)])
    roce("IPv6 UD SEND_ONLY_WITH_IMMEDIATE 256 B", 0x65, 256, v6=True,
         ip=V6X, dqpn=0x000ABC, psn=0xFFFFFF,
         hdrs=[DETH(qkey=0xFFFFFFFF, src_qp=0x000DEF), ImmDt(imm=0x99)])
    # --- CNP ---
    roce("CNP, TOS 0xC2, UDP sport 0 (ConnectX style)", 0x81, 0, rsp=True,
         sport=0, udp_csum=0, ip=A(tos=0xC2, id=0x718C), becn=1,
         dqpn=0x000118, psn=0, hdrs=[CNPPadding()])
    roce("IPv6 CNP", 0x81, 0, v6=True, rsp=True, sport=0xC000, ip=V6X,
         becn=1, dqpn=0x123456, psn=0, hdrs=[CNPPadding()])
    # --- negative checks ---
    roce("BAD ICRC: RC SEND_ONLY 12 B, payload byte flipped after build",
         0x04, 12, dqpn=0x11, psn=7, udp_csum=0)
    b = bytearray(FRAMES[-1][0])
    b[14 + 20 + 8 + 12 + 3] ^= 0x01
    FRAMES[-1] = (bytes(b), FRAMES[-1][1])
    NEG[len(FRAMES)] = "bad_icrc"
    other("NOT RoCE: UDP to port 53 (DNS query)", raw(
        Ether(src=MAC_A, dst=MAC_B) / IP(src=V4_A, dst=V4_B, id=7) /
        UDP(sport=40000, dport=53) / DNS(id=0x4791, rd=1,
                                        qd=DNSQR(qname="gorxe.example."))))
    NEG[len(FRAMES)] = "not_roce"
    other("TRUNCATED RoCE: UDP 4791 with 8 bytes of BTH only", raw(
        Ether(src=MAC_A, dst=MAC_B) / IP(src=V4_A, dst=V4_B, id=8,
                                         flags="DF") /
        UDP(sport=0xC0DE, dport=ROCE_PORT) /
        Raw(bytes.fromhex("0400ffff00000011"))))
    NEG[len(FRAMES)] = "truncated"


# ---------------------------------------------------------------------------
# Re-dissection and JSON
# ---------------------------------------------------------------------------

def endpoint(pkt):
    if IPv6 in pkt:
        return ("[%s]:%d" % (pkt[IPv6].src, pkt[UDP].sport),
                "[%s]:%d" % (pkt[IPv6].dst, pkt[UDP].dport))
    return ("%s:%d" % (pkt[IP].src, pkt[UDP].sport),
            "%s:%d" % (pkt[IP].dst, pkt[UDP].dport))


def describe(num, pkt, wire):
    """JSON object for one RoCE frame, from scapy's dissection of it."""
    bth = pkt[BTH]
    name, chain, _ = OPCODES[bth.opcode]
    scapy_name = bth.get_field("opcode").i2s.get(bth.opcode)
    if scapy_name is not None:
        assert scapy_name == name, (scapy_name, name)
    layers = []
    l = bth.payload
    while l and not isinstance(l, (Raw,)) and l.__class__.__name__ != "Padding":
        layers.append(type(l))
        l = l.payload
    assert layers == chain, (num, layers, chain)
    src, dst = endpoint(pkt)
    o = {"frame": num, "src": src, "dst": dst, "opcode": name,
         "opcode_num": bth.opcode, "se": bool(bth.solicited),
         "migreq": bool(bth.migreq), "pad": bth.padcount, "tver": bth.version,
         "pkey": bth.pkey, "fecn": bool(bth.fecn), "becn": bool(bth.becn),
         "dqpn": bth.dqpn, "ackreq": bool(bth.ackreq), "psn": bth.psn}
    extra = {}
    if RETH in pkt:
        r = pkt[RETH]
        o["reth"] = {"va": r.va, "rkey": r.rkey, "dma_len": r.dma_len}
    if AETH in pkt:
        o["aeth"] = {"syndrome": pkt[AETH].syndrome, "msn": pkt[AETH].msn}
    if AtomicETH in pkt:
        a = pkt[AtomicETH]
        o["atomiceth"] = {"va": a.va, "rkey": a.rkey,
                          "swap_add": a.swap_add, "compare": a.compare}
    if AtomicAckETH in pkt:
        o["atomicacketh"] = {"orig": pkt[AtomicAckETH].orig}
    if ImmDt in pkt:
        o["immdt"] = pkt[ImmDt].imm
    if IETH in pkt:
        o["ieth"] = pkt[IETH].rkey
    if DETH in pkt:
        o["deth"] = {"qkey": pkt[DETH].qkey, "src_qp": pkt[DETH].src_qp}
    if FETH in pkt:
        f = pkt[FETH]
        extra["feth"] = {"value": (f.resv << 6) | (f.sel << 4) | f.plt}
    load = pkt[Raw].load if Raw in pkt else b""
    assert len(load) >= bth.padcount
    o["payload_len"] = len(load) - bth.padcount
    crc = struct.unpack("<I", struct.pack(">I", bth.icrc))[0]
    ipoff = 14
    iplen = (pkt[IP].len if IPv6 not in pkt else pkt[IPv6].plen + 40)
    ipb = wire[ipoff:ipoff + iplen]
    assert crc == struct.unpack("<I", ipb[-4:])[0]
    o["icrc"] = crc
    ok = icrc_scapy(pkt) == crc
    assert (icrc_bytes_independent(ipb) == crc) == ok, num
    o["icrc_ok"] = ok
    return o, extra


def main():
    self_test()
    build_all()
    pkts = []
    for i, (b, _) in enumerate(FRAMES):
        p = Ether(b)
        p.time = T0 + i // 1000 + (i % 1000) / 1000.0  # 1 ms apart
        pkts.append(p)
    wrpcap(PCAP, pkts, linktype=1)
    back = rdpcap(PCAP)
    assert len(back) == len(FRAMES)
    lines, extras = [], {}
    for i, p in enumerate(back):
        num = i + 1
        wire = raw(p)
        assert wire == FRAMES[i][0]
        kind = NEG.get(num)
        if kind == "not_roce":
            assert BTH not in p
            continue
        if kind == "truncated":
            lines.append({"frame": num, "error": True})
            continue
        o, extra = describe(num, p, wire)
        assert o["icrc_ok"] == (kind != "bad_icrc"), num
        if extra:
            extras[num] = extra
        lines.append(o)
    with open(JSONL, "w") as f:
        for o in lines:
            f.write(json.dumps(o, separators=(",", ":")) + "\n")
    # Table for the README (stdout), so the README can be checked against it.
    for i, (b, desc) in enumerate(FRAMES):
        x = extras.get(i + 1)
        print("| %d | %s%s |" % (i + 1, desc,
                                 " (FETH word 0x%08x)" % x["feth"]["value"]
                                 if x else ""))
    print("scapy %s, %d frames, %d json lines" % (
        scapy.__version__, len(FRAMES), len(lines)), file=sys.stderr)


if __name__ == "__main__":
    main()
