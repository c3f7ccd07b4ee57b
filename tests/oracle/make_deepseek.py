#!/usr/bin/env python3
"""A tiny DeepSeek V2 or V3 model (multi-head latent attention, routed and shared experts) with
random weights, for ptn's tests and for tests/oracle/hf_forward.py.

Written for ptn's tests from the config keys and tensor names of DeepSeek's V2/V3 checkpoints and
Hugging Face transformers' DeepseekV2/DeepseekV3 classes (no code of either is copied).

Usage: make_deepseek.py OUT_DIR SEED VERSION [mtp]
  OUT_DIR  created if missing; gets config.json and model.safetensors (one file, F32)
  SEED     seed of numpy's default_rng
  VERSION  v2  DeepseekV2ForCausalLM as V2-Lite has it: q_proj (q_lora_rank null), softmax
               routing, greedy top-k, routed_scaling_factor 1.5
           v3  DeepseekV3ForCausalLM: the query through q_lora_rank (q_a_proj, q_a_layernorm,
               q_b_proj), sigmoid scores chosen with e_score_correction_bias within the best 2
               of 4 groups, renormalised, times 2.5

  mtp      (V3) also a multi-token-prediction layer after the last, as DeepSeek-V3 ships it
           (model.layers.3.*: enorm, hnorm, eh_proj and a decoder layer), with
           num_nextn_predict_layers 1; a program leaves it out

The model: 3 layers of 4 heads; kv_lora_rank 32, qk_nope_head_dim 16, qk_rope_head_dim 8,
v_head_dim 12 (unlike nope, so that kv_b_proj's per-head split is exercised); layer 0 dense
(first_k_dense_replace 1, intermediate_size 48), layers 1 and 2 with 8 routed experts of width 16,
3 per token, and 2 shared experts (one MLP of width 32). YaRN x4 from 64 positions with mscale
and mscale_all_dim 0.707 (the softmax scale grows by mscale^2). The router's weights are scaled so
that its logits are well apart (no near ties that float32 and float64 could order differently);
V3's selection bias is positive, so that every biased score is positive.
"""
import sys

import numpy as np

from safetensors_out import write_model_dir

VOCAB, HIDDEN, LAYERS, HEADS = 320, 64, 3, 4
KV_LORA, Q_LORA, NOPE, ROPE, V = 32, 24, 16, 8, 12
EXPERTS, TOP_K, EXPERT_FFN, SHARED, DENSE_FFN = 8, 3, 16, 2, 48
ROUTER_STD = 0.4


def make_config(version):
    c = {"architectures": ["DeepseekV2ForCausalLM" if version == "v2" else "DeepseekV3ForCausalLM"],
         "model_type": "deepseek_v2" if version == "v2" else "deepseek_v3",
         "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": DENSE_FFN,
         "moe_intermediate_size": EXPERT_FFN, "num_hidden_layers": LAYERS,
         "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
         "n_routed_experts": EXPERTS, "n_shared_experts": SHARED, "num_experts_per_tok": TOP_K,
         "first_k_dense_replace": 1, "moe_layer_freq": 1,
         "kv_lora_rank": KV_LORA, "q_lora_rank": None if version == "v2" else Q_LORA,
         "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": V,
         "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                          "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
         "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": False}
    if version == "v2":
        c.update({"topk_method": "greedy", "scoring_func": "softmax", "norm_topk_prob": False,
                  "routed_scaling_factor": 1.5, "n_group": 1, "topk_group": 1})
    else:
        c.update({"topk_method": "noaux_tc", "scoring_func": "sigmoid", "norm_topk_prob": True,
                  "routed_scaling_factor": 2.5, "n_group": 4, "topk_group": 2, "rope_interleave": True})
    return c


def make_tensors(rng, version):
    f32 = lambda a: np.asarray(a, dtype=np.float32)

    def matrix(rows, cols):  # standard deviation 1/sqrt(fan-in)
        return f32(rng.normal(0.0, cols ** -0.5, (rows, cols)))

    def norm_weight(n):
        return f32(rng.uniform(0.7, 1.3, n))

    t = {"model.embed_tokens.weight": f32(rng.normal(0.0, 1.0, (VOCAB, HIDDEN))),
         "lm_head.weight": matrix(VOCAB, HIDDEN),
         "model.norm.weight": norm_weight(HIDDEN)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        t[p + "input_layernorm.weight"] = norm_weight(HIDDEN)
        t[p + "post_attention_layernorm.weight"] = norm_weight(HIDDEN)
        if version == "v2":
            t[a + "q_proj.weight"] = matrix(HEADS * (NOPE + ROPE), HIDDEN)
        else:
            t[a + "q_a_proj.weight"] = matrix(Q_LORA, HIDDEN)
            t[a + "q_a_layernorm.weight"] = norm_weight(Q_LORA)
            t[a + "q_b_proj.weight"] = matrix(HEADS * (NOPE + ROPE), Q_LORA)
        t[a + "kv_a_proj_with_mqa.weight"] = matrix(KV_LORA + ROPE, HIDDEN)
        t[a + "kv_a_layernorm.weight"] = norm_weight(KV_LORA)
        t[a + "kv_b_proj.weight"] = matrix(HEADS * (NOPE + V), KV_LORA)
        t[a + "o_proj.weight"] = matrix(HIDDEN, HEADS * V)
        m = p + "mlp."
        if l == 0:
            t[m + "gate_proj.weight"] = matrix(DENSE_FFN, HIDDEN)
            t[m + "up_proj.weight"] = matrix(DENSE_FFN, HIDDEN)
            t[m + "down_proj.weight"] = matrix(HIDDEN, DENSE_FFN)
            continue
        t[m + "gate.weight"] = f32(rng.normal(0.0, ROUTER_STD, (EXPERTS, HIDDEN)))
        if version == "v3":
            t[m + "gate.e_score_correction_bias"] = f32(rng.uniform(0.0, 0.2, EXPERTS))
        for e in range(EXPERTS):
            x = f"{m}experts.{e}."
            t[x + "gate_proj.weight"] = matrix(EXPERT_FFN, HIDDEN)
            t[x + "up_proj.weight"] = matrix(EXPERT_FFN, HIDDEN)
            t[x + "down_proj.weight"] = matrix(HIDDEN, EXPERT_FFN)
        s = m + "shared_experts."
        t[s + "gate_proj.weight"] = matrix(SHARED * EXPERT_FFN, HIDDEN)
        t[s + "up_proj.weight"] = matrix(SHARED * EXPERT_FFN, HIDDEN)
        t[s + "down_proj.weight"] = matrix(HIDDEN, SHARED * EXPERT_FFN)
    return t


def main(argv):
    if len(argv) not in (4, 5) or argv[3] not in ("v2", "v3") or (len(argv) == 5 and (argv[4] != "mtp" or argv[3] != "v3")):
        raise SystemExit(__doc__)
    out_dir, seed, version = argv[1], int(argv[2]), argv[3]
    rng = np.random.default_rng(seed)
    tensors = make_tensors(rng, version)
    config = make_config(version)
    if len(argv) == 5:  # the MTP module: drawn after the model, so the model's tensors stay the same
        p = f"model.layers.{LAYERS}."
        f32 = lambda a: np.asarray(a, dtype=np.float32)
        for name, shape in (("enorm.weight", (HIDDEN,)), ("hnorm.weight", (HIDDEN,)), ("eh_proj.weight", (HIDDEN, 2 * HIDDEN)),
                            ("input_layernorm.weight", (HIDDEN,)), ("self_attn.kv_a_proj_with_mqa.weight", (KV_LORA + ROPE, HIDDEN)),
                            ("shared_head.norm.weight", (HIDDEN,))):
            tensors[p + name] = f32(rng.normal(0.0, 0.1, shape))
        config["num_nextn_predict_layers"] = 1
    write_model_dir(out_dir, config, tensors)


if __name__ == "__main__":
    main(sys.argv)
