#!/usr/bin/env python3
"""A tiny Llama 4 text model with mixture-of-experts layers and random weights, for ptn's tests
and for tests/oracle/hf_forward.py.

Written for ptn's tests from the shapes and tensor names of Hugging Face transformers'
Llama4TextConfig, Llama4TextMoe, Llama4TextExperts and Llama4TextMLP (no code of transformers is
copied).

Usage: make_llama4.py OUT_DIR SEED [FORM [TOP_K]]
  OUT_DIR  created if missing; gets config.json and model.safetensors (one file, F32)
  SEED     seed of numpy's default_rng
  FORM     causal       Llama4ForCausalLM: a flat config, tensors model.* and lm_head.weight
                        (the default)
           conditional  Llama4ForConditionalGeneration: the text config under "text_config"
                        (tie_word_embeddings at the top, as Meta's configs have it), tensors
                        language_model.model.* and language_model.lm_head.weight; no vision tower
  TOP_K    num_experts_per_tok, 1 (the default, as in the released models) to 4

The weights depend on SEED only: both forms and every TOP_K are drawn from the same random
stream in the same order, so one SEED gives the same tensors, under the two forms' names.

The model: 4 layers of 4 query heads of 16 over 2 KV heads; layers 1 and 3 MoE
(interleave_moe_layer_step 2, and the moe_layers list it gives, as released configs carry both),
layers 0 and 2 a dense MLP of intermediate_size_mlp 96; layer 3 NoPE (no_rope_layers
[1, 1, 1, 0]: a 1 is a layer with RoPE), the RoPE layers chunked by 8 with the weightless q/k
L2 norm; attention temperature tuning on the NoPE layer with floor_scale 4, so that it varies
within a short sequence. An MoE layer: a router over 4 experts of width 32 (experts.gate_up_proj
[E, H, 2F], the gate in the first F columns, the up in the last F; experts.down_proj [E, F, H])
and a shared expert of the same width. The router's weights are scaled so that its logits have
a standard deviation near 3: well apart (no near ties that float32 and float64 could order
differently) while the sigmoid of the chosen logit stays well below 1.
"""
import sys

import numpy as np

from safetensors_out import write_model_dir

VOCAB, HIDDEN, LAYERS = 320, 64, 4
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
EXPERTS, EXPERT_FFN, DENSE_FFN = 4, 32, 96
MOE_STEP = 2
MOE_LAYERS = list(range(MOE_STEP - 1, LAYERS, MOE_STEP))  # [1, 3]
ROUTER_STD = 0.4  # logits x . w over normed x of RMS about 1: standard deviation 0.4 * sqrt(64) = 3.2

TEXT_CONFIG = {
    "model_type": "llama4_text",
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
    "intermediate_size": EXPERT_FFN, "intermediate_size_mlp": DENSE_FFN,
    "num_local_experts": EXPERTS, "num_experts_per_tok": 1,
    "interleave_moe_layer_step": MOE_STEP, "moe_layers": MOE_LAYERS,
    "no_rope_layers": [int((l + 1) % 4 != 0) for l in range(LAYERS)],
    "attention_chunk_size": 8, "use_qk_norm": True,
    "attn_temperature_tuning": True, "floor_scale": 4, "attn_scale": 0.1,
    "rope_theta": 500000.0, "rope_scaling": None, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False,
}


def make_tensors(rng, form):
    """Every tensor in one fixed order, whatever the form; only the names differ."""
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    model = "language_model.model." if form == "conditional" else "model."
    head = "language_model.lm_head.weight" if form == "conditional" else "lm_head.weight"

    def matrix(*shape):  # standard deviation 1/sqrt(fan-in), the fan-in the next-to-last axis
        fan_in = shape[-1] if len(shape) == 2 else shape[-2]
        return f32(rng.normal(0.0, fan_in ** -0.5, shape))

    def norm_weight():
        return f32(rng.uniform(0.7, 1.3, HIDDEN))

    t = {model + "embed_tokens.weight": f32(rng.normal(0.0, 1.0, (VOCAB, HIDDEN))),
         head: matrix(VOCAB, HIDDEN),
         model + "norm.weight": norm_weight()}
    for l in range(LAYERS):
        p = f"{model}layers.{l}."
        t[p + "input_layernorm.weight"] = norm_weight()
        t[p + "post_attention_layernorm.weight"] = norm_weight()
        for name, rows, cols in (("q_proj", HEADS * HEAD_DIM, HIDDEN), ("k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
                                 ("v_proj", KV_HEADS * HEAD_DIM, HIDDEN), ("o_proj", HIDDEN, HEADS * HEAD_DIM)):
            t[p + f"self_attn.{name}.weight"] = matrix(rows, cols)
        f = p + "feed_forward."
        if l in MOE_LAYERS:
            t[f + "router.weight"] = f32(rng.normal(0.0, ROUTER_STD, (EXPERTS, HIDDEN)))
            t[f + "experts.gate_up_proj"] = matrix(EXPERTS, HIDDEN, 2 * EXPERT_FFN)  # [E, H, 2F]: gate | up
            t[f + "experts.down_proj"] = matrix(EXPERTS, EXPERT_FFN, HIDDEN)  # [E, F, H]
            t[f + "shared_expert.gate_proj.weight"] = matrix(EXPERT_FFN, HIDDEN)
            t[f + "shared_expert.up_proj.weight"] = matrix(EXPERT_FFN, HIDDEN)
            t[f + "shared_expert.down_proj.weight"] = matrix(HIDDEN, EXPERT_FFN)
        else:
            t[f + "gate_proj.weight"] = matrix(DENSE_FFN, HIDDEN)
            t[f + "up_proj.weight"] = matrix(DENSE_FFN, HIDDEN)
            t[f + "down_proj.weight"] = matrix(HIDDEN, DENSE_FFN)
    return t


def make_config(form, top_k):
    text = dict(TEXT_CONFIG, num_experts_per_tok=top_k)
    if form == "causal":
        return dict({"architectures": ["Llama4ForCausalLM"]}, **text, tie_word_embeddings=False)
    return {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
            "text_config": text, "tie_word_embeddings": False}


def main(argv):
    if len(argv) not in (3, 4, 5) or (len(argv) > 3 and argv[3] not in ("causal", "conditional")):
        raise SystemExit(__doc__)
    out_dir, seed = argv[1], int(argv[2])
    form = argv[3] if len(argv) > 3 else "causal"
    top_k = int(argv[4]) if len(argv) > 4 else 1
    if not 1 <= top_k <= EXPERTS:
        raise SystemExit(f"TOP_K {top_k}: expected 1 to {EXPERTS}")
    tensors = make_tensors(np.random.default_rng(seed), form)
    write_model_dir(out_dir, make_config(form, top_k), tensors)


if __name__ == "__main__":
    main(sys.argv)
