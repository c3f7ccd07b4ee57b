// Quantized block layouts, byte for byte the same as GGUF's (ggml's block_q4_0, block_q4_K, ...),
// so GGUF tensors are used in place. `d`/`dmin` fields are IEEE half floats stored as uint16_t.
#pragma once
#include <cstdint>

namespace ptn {

constexpr int QK4_0 = 32;
constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK4_NL = 32;
constexpr int QK_MXFP4 = 32;
constexpr int QK_K = 256;         // super-block size of the K-quants
constexpr int K_SCALE_SIZE = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// Q4_0: 32 weights, x = d * (q - 8), q in 0..15. qs[j] holds element j (low nibble) and j+16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: 32 weights, x = d * q + m, q in 0..15 (m: the block's minimum); nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: 32 weights, x = d * (q - 16), q in 0..31; low nibbles as Q4_0, bit 4 of element j in qh bit j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: 32 weights, x = d * q + m, q in 0..31; low nibbles and qh bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// IQ4_NL: 32 weights, x = d * kIq4nlValues[q], q in 0..15 (a non-linear grid); nibbles as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// The 16 levels of IQ4_NL (and IQ4_XS), ggml's kvalues_iq4nl.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP microscaling FP4): 32 weights, x = 2^(e-128) * kMxfp4Values[q], e an E8M0 exponent,
// q in 0..15 (an E2M1 value, doubled so that the table holds integers); nibbles as Q4_0.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// The 16 E2M1 values of MXFP4 times two (ggml's kvalues_mxfp4): sign bit 3, then 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 doubled.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Q8_0: 32 weights, x = d * q, q in -127..127 (the quantizer never emits -128).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q2_K: 256 weights in 16 sub-blocks of 16; x = d*sc[j]*q - dmin*m[j], q 2 bits, sc[j] (low
// nibble) and m[j] (high nibble) 4 bits each in scales[j]. Element 128h + 32i + l (h = 0, 1; i =
// 0..3; l = 0..31) is bits 2i..2i+1 of qs[32h + l] and belongs to sub-block 8h + 2i + l/16.
struct BlockQ2K {
  uint8_t scales[QK_K / 16];
  uint8_t qs[QK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2K) == 84);

// Q3_K: 256 weights in 16 sub-blocks of 16; x = d*(sc[j]-32)*(q-4), q 3 bits: the low 2 as Q2_K's
// qs, the high one bit 4h+i of hmask[l] (element 128h + 32i + l); the 6-bit sc[j] packed in
// scales[12] (low 4 bits: nibble j/8 of byte j%8; high 2 bits: bits 2(j/4).. of byte 8 + j%4).
struct BlockQ3K {
  uint8_t hmask[QK_K / 8];
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3K) == 110);

// Q4_K: 256 weights in 8 sub-blocks of 32; x = d*sc[j]*q - dmin*m[j], 6-bit sc/m packed in scales[12].
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4K) == 144);

// Q5_K: as Q4_K with a fifth bit per weight in qh[32].
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5K) == 176);

// Q6_K: 256 weights in 16 sub-blocks of 16; x = d * scales[j] * (q - 32), q 6 bits (ql low 4, qh high 2).
struct BlockQ6K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 210);

// IQ4_XS: 256 weights in 8 sub-blocks of 32; x = d*(ls[j]-32)*kIq4nlValues[q], q 4 bits (sub-block
// j's 32 weights as an IQ4_NL block's nibbles in qs[16j..16j+15]), ls[j] 6 bits: low 4 in nibble
// j%2 of scales_l[j/2], high 2 in bits 2j..2j+1 of scales_h.
struct BlockIQ4XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockIQ4XS) == 136);

// IQ2_XXS: 256 weights in 8 sub-blocks of 32, each 4 groups of 8 from a 256-entry codebook of
// magnitudes 8, 25, 43 (core/iq_grids.h). Sub-block j is the 64-bit little-endian pair of words at
// qs[8j]: the first word's bytes are the 4 grid indices, the second holds four 7-bit sign fields
// (bits 7l..7l+6 for group l; the 8th sign makes the count of minus signs even) and the scale in
// bits 28..31: x = d * (2 * (w >> 28) + 1) / 8 * magnitude * sign.
struct BlockIQ2XXS {
  uint16_t d;
  uint8_t qs[QK_K / 4];
};
static_assert(sizeof(BlockIQ2XXS) == 66);

// IQ2_XS: as IQ2_XXS, but each group has its own 16-bit little-endian word at qs[2 * (4j + l)]:
// a 9-bit index into a 512-entry codebook and a 7-bit sign field above it; sub-block j's two
// halves of 16 have the scales nibble h (low first) of scales[j]: x = d * (2 * nibble + 1) / 8 * ...
struct BlockIQ2XS {
  uint16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(BlockIQ2XS) == 74);

// IQ2_S: a 1024-entry codebook. Group l of sub-block j: index qs[4j + l] with bits 2l, 2l+1 of
// qh[j] as bits 8, 9; its 8 signs are the bits of qs[32 + 4j + l] (bit i: weight i); scales as
// IQ2_XS.
struct BlockIQ2S {
  uint16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(BlockIQ2S) == 82);

// IQ1_S: 256 weights in 8 sub-blocks of 32, each 4 groups of 8 from a 2048-entry codebook of
// values -1, 0, 1 (core/iq_grids.h), shifted by a delta of +-1/8 per sub-block. Sub-block j's
// 16-bit little-endian word h at qh[2j]: bits 3l..3l+2 are bits 8..10 of group l's index (low
// bits qs[4j + l]), bits 12..14 the scale, bit 15 the delta's sign:
// x = d * (2 * ((h >> 12) & 7) + 1) * (value + delta).
struct BlockIQ1S {
  uint16_t d;
  uint8_t qs[QK_K / 8];
  uint8_t qh[QK_K / 16];
};
static_assert(sizeof(BlockIQ1S) == 50);

// IQ1_M: the IQ1_S codebook with a delta per group of 8 and a 3-bit scale per 16 weights.
// Sub-block j, group l: index qs[4j + l] with bits 8..10 from the nibble l % 2 (low first) of
// qh[2j + l / 2], whose top bit is the delta's sign. The scales are four 16-bit little-endian
// words; bits 6(j % 2)..+2 and +3..+5 of word j / 2 are the scales of sub-block j's two halves,
// and the words' top nibbles (word 0 lowest) form the f16 block scale d.
struct BlockIQ1M {
  uint8_t qs[QK_K / 8];
  uint8_t qh[QK_K / 16];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(BlockIQ1M) == 56);

// IQ3_XXS: 256 weights in 8 sub-blocks of 32, each 8 groups of 4 from a 256-entry codebook
// (core/iq_grids.h). Sub-block j: grid indices qs[8j..8j+7] (group g = qs[8j + g]); the 32-bit
// little-endian word w at qs[64 + 4j] holds four 7-bit sign fields (bits 7l..7l+6 for the 8
// weights of groups 2l, 2l+1; the 8th sign makes the count of minus signs even) and the scale
// in bits 28..31: x = d * (2 * (w >> 28) + 1) / 4 * magnitude * sign.
struct BlockIQ3XXS {
  uint16_t d;
  uint8_t qs[3 * QK_K / 8];
};
static_assert(sizeof(BlockIQ3XXS) == 98);

// IQ3_S: 256 weights in 8 sub-blocks of 32, each 8 groups of 4 from a 512-entry codebook.
// Sub-block j: group g's 9-bit index is qs[8j + g] with bit g of qh[j] as bit 8; the 32 signs
// are the bits of signs[4j..4j+3] (bit i of byte l: weight 8l + i); its scale is nibble j % 2
// (low first) of scales[j / 2]: x = d * (2 * nibble + 1) * magnitude * sign.
struct BlockIQ3S {
  uint16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t signs[QK_K / 8];
  uint8_t scales[QK_K / 64];
};
static_assert(sizeof(BlockIQ3S) == 110);

// TQ1_0 (ternary, BitNet b1.58 / TriLM): 256 weights x = d * (t - 1), t in 0..2 (a trit).
// Five trits per byte, most significant first, stored as ceil(value * 256 / 243) so that trit n
// of byte b is ((uint8_t)(b * 3^n) * 3) >> 8. Elements 0..159: trit e/32 of qs[e%32]; 160..239:
// trit (e-160)/16 of qs[32 + (e-160)%16]; 240..255: trit (e-240)/4 of qh[(e-240)%4] (four trits).
struct BlockTQ1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54);

// TQ2_0: 256 weights x = d * (q - 1), q 2 bits in 0..2, laid out as Q2_K's codes: element
// 128 h + 32 l + m is bits 2l..2l+1 of qs[32 h + m].
struct BlockTQ2_0 {
  uint8_t qs[QK_K / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66);

// Q8_K: activation blocks for the K-quant dot products; f32 scale, sums of each 16 q's.
struct BlockQ8K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};
static_assert(sizeof(BlockQ8K) == 292);

}  // namespace ptn
