#!/usr/bin/env python3
"""Writes the kv_record fuzz seeds (fuzz/corpus/kv_record/) from docs/kv-format.md alone: an
independent writer of the format (CRC32C, the chained block hash), so the seeds also check that
the document and src/kvcache/kv_record.cpp agree (the replay test requires every seed to decode).

    scripts/make-kv-seeds.py fuzz/corpus/kv_record
"""
import os
import struct
import sys

M64 = (1 << 64) - 1


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def mix64(x):
    x ^= x >> 32
    x = (x * 0xd6e8feb86659fd93) & M64
    x ^= x >> 32
    x = (x * 0xd6e8feb86659fd93) & M64
    x ^= x >> 32
    return x


def absorb(state, word):
    state ^= mix64((word + 0x9e3779b97f4a7c15) & M64)
    state = ((state << 23) | (state >> 41)) & M64
    return (state * 0xa0761d6478bd642f + 0xe7037ed1a0b428db) & M64


def prefix_root():
    return mix64(absorb(0x70746e2d6b766361, 0))


def hash_block(parent, tokens):
    h = absorb(0x5bd1e9955bd1e995, parent)
    h = absorb(h, len(tokens))
    i = 0
    while i + 1 < len(tokens):
        h = absorb(h, ((tokens[i] & 0xFFFFFFFF) << 32) | (tokens[i + 1] & 0xFFFFFFFF))
        i += 2
    if i < len(tokens):
        h = absorb(h, (tokens[i] & 0xFFFFFFFF) | (1 << 40))
    return mix64(h)


ROW_BYTES = {0: lambda d: 4 * d, 1: lambda d: 2 * d, 30: lambda d: 2 * d, 8: lambda d: 34 * d // 32}


def record(program_id, dtype, bs, layers, tokens, meta, blocks_tokens):
    """layers: (kv_heads, dk, dv, kind, span); blocks_tokens: the tokens of each block."""
    block_bytes = sum(h * bs * (ROW_BYTES[dtype](dk) + ROW_BYTES[dtype](dv)) for h, dk, dv, _, _ in layers)
    out = bytearray(b"PTNKVREC")
    out += struct.pack("<IIQIII", 1, 0, program_id, dtype, bs, len(layers))
    for layer in layers:
        out += struct.pack("<5I", *layer)
    out += struct.pack("<I", len(tokens)) + struct.pack(f"<{len(tokens)}i", *tokens)
    out += struct.pack("<I", len(meta)) + meta
    out += struct.pack("<IQ", len(blocks_tokens), block_bytes)
    parent = prefix_root()
    for i, bt in enumerate(blocks_tokens):
        h = hash_block(parent, bt)
        data = bytes((i * 31 + j * 7) & 0xFF for j in range(block_bytes))
        if dtype == 8:  # q8_0: keep the f16 scales finite (34-byte blocks, scale first)
            data = bytearray(data)
            for off in range(0, block_bytes, 34):
                data[off:off + 2] = b"\x00\x3c"  # 1.0
            data = bytes(data)
        out += struct.pack("<QQ", h, parent) + struct.pack(f"<{bs}i", *bt) + data
        parent = h
    out += struct.pack("<I", crc32c(bytes(out)))
    return bytes(out)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    toks = [(i * 37 + 5) % 512 for i in range(11)]
    # A session of 11 tokens in blocks of 4 (2 full blocks), 2 full layers of f32, a conversation as meta.
    full = [(2, 8, 8, 0, 0), (2, 8, 8, 0, 0)]
    seeds = {
        "session-f32": record(0x123400000abc, 0, 4, full, toks, b'[{"role":"user","content":"hi"}]',
                              [toks[0:4], toks[4:8]]),
        # One block of a tier record: no tokens, f16, a window layer and a full one.
        "tier-f16-window": record(0x99, 1, 4, [(1, 8, 8, 1, 6), (2, 8, 4, 0, 0)], [], b"", [toks[0:4]]),
        # bf16 chunk layer, a session whose blocks cover nothing yet.
        "session-bf16-chunk-empty": record(7, 30, 2, [(1, 4, 4, 2, 8)], toks[:1], b"", []),
        # q8_0 (head dims multiples of 32), 3 blocks of 2.
        "session-q8_0": record(1 << 40, 8, 2, [(1, 32, 32, 0, 0)], toks[:7], b"{}",
                               [toks[0:2], toks[2:4], toks[4:6]]),
    }
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
