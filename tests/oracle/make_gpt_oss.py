#!/usr/bin/env python3
"""A tiny gpt-oss (GptOssForCausalLM) directory with random weights, for ptn's tests and for
tests/oracle/hf_forward.py.

Usage: make_gpt_oss.py OUT_DIR FORM SEED
  OUT_DIR  created if missing; gets config.json and model.safetensors (one file)
  FORM     mxfp4        the experts as OpenAI ships them: *_blocks / *_scales (U8), with a
                        quantization_config in config.json
           dequantized  the experts as transformers holds them after dequantizing:
                        gate_up_proj [E, H, 2F] and down_proj [E, F, H] (F32)
  SEED     seed of numpy's default_rng

Both forms are drawn from the same random stream in the same order, so one SEED gives one model:
the dequantized experts are exactly (in F32, no rounding) the values the MXFP4 blocks and scales
encode, and every other tensor is the same bytes. Everything but the MXFP4 bytes is F32.

The model: 2 layers (sliding window 5, then full attention), 4 query heads of 16 over 2 KV heads,
biases on q/k/v/o, attention sinks between -1 and 2, 4 experts with 2 chosen per token, yarn
RoPE. The gate/up biases of the experts have standard deviation 6, so that the SwiGLU clamps at
swiglu_limit (7) cut a good share of the gate values from above and of the up values on both
sides.
"""
import sys

import numpy as np

from safetensors_out import write_model_dir

VOCAB, HIDDEN, FFN, LAYERS = 300, 64, 64, 2
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
EXPERTS, CHOSEN = 4, 2
MX_GROUP = 32  # MXFP4: elements sharing one scale byte; 16 bytes of two codes each

CONFIG = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
    "num_local_experts": EXPERTS, "num_experts_per_tok": CHOSEN, "experts_per_token": CHOSEN,
    "sliding_window": 5, "layer_types": ["sliding_attention", "full_attention"],
    # yarn: factor == max_position_embeddings / original_max_position_embeddings, the one case
    # in which the transformers versions agree on the scale (hf_forward.py refuses the others).
    "max_position_embeddings": 256, "initial_context_length": 64,
    "rms_norm_eps": 1e-5, "rope_theta": 150000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                     "original_max_position_embeddings": 64},
    "attention_bias": True, "swiglu_limit": 7.0, "tie_word_embeddings": False, "hidden_act": "silu",
}
QUANTIZATION = {"quant_method": "mxfp4", "modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}

# FP4 E2M1 values by 4-bit code (bit 3 the sign).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                dtype=np.float32)


# ---- MXFP4 ------------------------------------------------------------------------------------

def random_mxfp4(rng, rows, cols, lowest_scale):
    """Blocks U8 [E, rows, cols/32, 16] of random codes (every byte value, -0 included) and scales
    U8 [E, rows, cols/32] drawn from lowest_scale .. lowest_scale + 3, groups scaled by
    2^(scale - 127)."""
    groups = cols // MX_GROUP
    blocks = rng.integers(0, 256, size=(EXPERTS, rows, groups, MX_GROUP // 2), dtype=np.uint8)
    scales = rng.integers(lowest_scale, lowest_scale + 4, size=(EXPERTS, rows, groups), dtype=np.uint8)
    return blocks, scales


def dequantize_mxfp4(blocks, scales):
    """The F32 [E, cols, rows] the blocks and scales encode: in each byte the low nibble is the
    earlier element of the pair; a group's values times 2^(scale - 127); the [E, rows, cols] this
    gives (rows the outputs) transposed to the [E, in, out] of gate_up_proj / down_proj. Exact in
    F32: every value is a 2-bit mantissa times a power of two well inside F32's range."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1)  # [E, rows, groups, 16, 2]
    values = E2M1[codes].reshape(blocks.shape[:3] + (MX_GROUP,))
    factor = np.exp2(scales.astype(np.int32) - 127).astype(np.float32)
    values = values * factor[..., None]
    e, rows = blocks.shape[:2]
    return np.ascontiguousarray(values.reshape(e, rows, -1).transpose(0, 2, 1), dtype=np.float32)


# ---- the model --------------------------------------------------------------------------------

def make_tensors(rng, form):
    f32 = lambda a: np.asarray(a, dtype=np.float32)

    def matrix(rows, cols):
        return f32(rng.normal(0.0, cols ** -0.5, (rows, cols)))

    def norm_weight():
        return f32(rng.uniform(0.7, 1.3, HIDDEN))

    def bias(n):
        return f32(rng.uniform(-0.3, 0.3, n))

    t = {"model.embed_tokens.weight": f32(rng.normal(0.0, 1.0, (VOCAB, HIDDEN))),
         "lm_head.weight": matrix(VOCAB, HIDDEN),
         "model.norm.weight": norm_weight()}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = norm_weight()
        t[p + "post_attention_layernorm.weight"] = norm_weight()
        for name, rows, cols in (("q_proj", HEADS * HEAD_DIM, HIDDEN), ("k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
                                 ("v_proj", KV_HEADS * HEAD_DIM, HIDDEN), ("o_proj", HIDDEN, HEADS * HEAD_DIM)):
            t[p + f"self_attn.{name}.weight"] = matrix(rows, cols)
            t[p + f"self_attn.{name}.bias"] = bias(rows)
        t[p + "self_attn.sinks"] = f32(rng.uniform(-1.0, 2.0, HEADS))
        t[p + "mlp.router.weight"] = matrix(EXPERTS, HIDDEN)
        t[p + "mlp.router.bias"] = bias(EXPERTS)
        # Drawn in the same order whatever the form, so both forms hold the same model.
        # gate_up scaled by 2^-5 .. 2^-2 (weights of RMS about 0.42); down by 2^-10 .. 2^-7, since
        # its inputs (up + 1) * glu reach 56: each layer's expert output then has a size near that
        # of the residual, and neither the second layer's attention nor its sinks are drowned.
        gate_up_blocks, gate_up_scales = random_mxfp4(rng, 2 * FFN, HIDDEN, 122)
        down_blocks, down_scales = random_mxfp4(rng, HIDDEN, FFN, 117)
        gate_up_bias = f32(rng.normal(0.0, 6.0, (EXPERTS, 2 * FFN)))
        down_bias = f32(rng.normal(0.0, 0.5, (EXPERTS, HIDDEN)))
        x = p + "mlp.experts."
        if form == "mxfp4":
            t[x + "gate_up_proj_blocks"] = gate_up_blocks
            t[x + "gate_up_proj_scales"] = gate_up_scales
            t[x + "gate_up_proj_bias"] = gate_up_bias
            t[x + "down_proj_blocks"] = down_blocks
            t[x + "down_proj_scales"] = down_scales
            t[x + "down_proj_bias"] = down_bias
        else:
            t[x + "gate_up_proj"] = dequantize_mxfp4(gate_up_blocks, gate_up_scales)  # [E, H, 2F]
            t[x + "gate_up_proj_bias"] = gate_up_bias
            t[x + "down_proj"] = dequantize_mxfp4(down_blocks, down_scales)  # [E, F, H]
            t[x + "down_proj_bias"] = down_bias
    return t


def main(argv):
    if len(argv) != 4 or argv[2] not in ("mxfp4", "dequantized"):
        raise SystemExit(__doc__)
    out_dir, form, seed = argv[1], argv[2], int(argv[3])
    tensors = make_tensors(np.random.default_rng(seed), form)
    config = dict(CONFIG, quantization_config=QUANTIZATION) if form == "mxfp4" else dict(CONFIG)
    write_model_dir(out_dir, config, tensors)


if __name__ == "__main__":
    main(sys.argv)
