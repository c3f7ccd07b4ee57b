#!/usr/bin/env python3
"""An independent forward pass of the decoder families ptn builds, in float64 with NumPy.

Written for ptn's tests from the math of Hugging Face transformers' modeling classes (nothing of
ptn's is used, and no code of transformers is copied):
  LlamaForCausalLM (LlamaAttention, LlamaMLP, LlamaRMSNorm, RoPE init functions default /
  linear / llama3 / yarn / longrope), MistralForCausalLM, Ministral3ForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
  GemmaForCausalLM (its MLP's activation as transformers 4 reads it: hidden_activation, default
  the tanh GELU), Gemma2ForCausalLM, Gemma3ForCausalLM and the text model of Gemma3ForConditionalGeneration,
  Phi3ForCausalLM, SmolLM3ForCausalLM, Llama4ForCausalLM and the text model of
  Llama4ForConditionalGeneration (dense layers of intermediate_size_mlp, and Llama4TextMoe on the
  layers of moe_layers / interleave_moe_layer_step: a sigmoid top-k router that scales each chosen
  expert's input, experts on gate-then-up halves, a shared expert), MixtralForCausalLM
  (MixtralSparseMoeBlock) and Qwen3MoeForCausalLM
  (Qwen3MoeSparseMoeBlock, decoder_sparse_step, mlp_only_layers), GptOssForCausalLM (attention
  sinks, the top-k router with its bias, the clamped SwiGLU experts on interleaved gate/up columns,
  their weights either dequantized or in MXFP4 blocks and scales as OpenAI ships them),
  OlmoeForCausalLM, Olmo2ForCausalLM (Olmo2DecoderLayer's norms on the sublayers' outputs, q/k
  norms over all heads), Olmo3ForCausalLM (OLMo 2's layer, windows on three layers of four by
  default, plain RoPE on the windowed layers: transformers 4.57's rotary_embs, OLMo-core's rule)
  and GraniteForCausalLM (embedding, attention, residual multipliers and
  logits_scaling), GraniteMoeForCausalLM (the same with JetMoE-style stacked experts),
  GraniteMoeSharedForCausalLM (and an ungated shared MLP beside the experts), StableLmForCausalLM (LayerNorms with biases, partial rotary, use_qkv_bias,
  use_parallel_residual), PhiForCausalLM (one LayerNorm feeding attention and the fc1/fc2 MLP in
  parallel, biases everywhere and on lm_head), Starcoder2ForCausalLM (LayerNorms, use_bias, the
  c_fc/c_proj MLP, a window on every layer) and CohereForCausalLM (CohereLayerNorm without bias,
  parallel attention and MLP, RoPE on interleaved pairs, logits times logit_scale),
  GPTNeoXForCausalLM (q|k|v fused per head, rotary_pct, the parallel MLP on its own norm),
  GlmForCausalLM and Glm4ForCausalLM (q/k/v biases, gate|up fused, RoPE on interleaved pairs of the
  first partial_rotary_factor of each head; GLM-4's norms on the sublayers' outputs),
  DeepseekV2ForCausalLM and DeepseekV3ForCausalLM (multi-head latent attention computed the plain
  way: kv_b_proj expands the normed latent into every head's key and value, the shared RoPE key
  joins each head, RoPE on adjacent pairs; the softmax scale times yarn's mscale(mscale_all_dim)^2
  as DeepSeek's own modeling code has it; V2's softmax routing, greedy or by group maxima, times
  routed_scaling_factor; V3's sigmoid scores chosen with e_score_correction_bias within the groups
  of the best two-score sums, renormalised and scaled; ungated shared experts; the first
  first_k_dense_replace layers dense); the masks
  of transformers' masking_utils (causal, sliding window `kv > q - W`, chunked `kv // C == q // C`);
  each family's config-class defaults for the keys read here, and both config forms (v4
  rope_theta + rope_scaling, v5 rope_parameters, flat or keyed by layer type).

Usage: hf_forward.py MODEL_DIR TOKEN_IDS OUT [HIDDEN_OUT]
  MODEL_DIR   a directory with config.json and model.safetensors (F32, BF16 or F16 tensors; U8 for
              MXFP4 blocks and scales)
  TOKEN_IDS   comma-separated token ids, run as one sequence from position 0
  OUT         written as float64 little-endian logits, [len(TOKEN_IDS), vocab] row-major
  HIDDEN_OUT  if given, the final hidden states (after the model's last norm, what
              transformers returns as last_hidden_state and embedding models pool), written as
              float64 little-endian [len(TOKEN_IDS), hidden_size] row-major
"""
import json
import math
import struct
import sys

import numpy as np


# ---- safetensors: u64 header length, JSON header, raw little-endian data --------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = blob[base + start:base + end]
        dtype, shape = info["dtype"], info["shape"]
        if dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dtype == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dtype == "U8":  # MXFP4 blocks (two FP4 codes a byte) and scales (E8M0 exponents): kept as bytes
            a = np.frombuffer(raw, dtype=np.uint8)
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {dtype} not handled by the oracle")
        out[name] = a.reshape(shape)
    return out


# ---- configuration: each family's config-class defaults ------------------------------------

COMMON = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False,
          "mlp_bias": False, "tie_word_embeddings": False, "sliding_window": None, "partial_rotary_factor": 1.0}
FAMILY_DEFAULTS = {
    "llama": {},
    "mistral": {"sliding_window": 4096},
    # Ministral3Config: no window; YaRN x16 from 16384 with the query temperature beta.
    "ministral3": {"rms_norm_eps": 1e-5, "sliding_window": None, "rope_parameters": {
        "type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}},
    "qwen2": {"sliding_window": 4096, "max_window_layers": 28, "use_sliding_window": False},
    "qwen3": {"sliding_window": 4096, "max_window_layers": 28, "use_sliding_window": False},
    "smollm3": {"sliding_window": None, "max_window_layers": 28, "use_sliding_window": False,
                "no_rope_layer_interval": 4, "tie_word_embeddings": True},
    "gemma2": {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "tie_word_embeddings": True},
    "gemma3": {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
               "final_logit_softcapping": None, "attn_logit_softcapping": None, "tie_word_embeddings": True},
    "phi3": {"rms_norm_eps": 1e-5, "sliding_window": None},
    # GemmaConfig; GemmaMLP (transformers 4) takes hidden_activation, the tanh GELU when absent,
    # whatever hidden_act says.
    "gemma": {"hidden_activation": "gelu_pytorch_tanh", "head_dim": 256, "tie_word_embeddings": True},
    # Llama4TextConfig: head_dim 128 whatever hidden_size / heads; moe_layers, when absent, every
    # interleave_moe_layer_step-th layer (so every layer by default).
    "llama4": {"rms_norm_eps": 1e-5, "rope_theta": 500000.0, "attention_chunk_size": 8192, "use_qk_norm": True,
               "attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1,
               "no_rope_layer_interval": 4, "head_dim": 128, "num_local_experts": 16, "num_experts_per_tok": 1,
               "interleave_moe_layer_step": 1, "moe_layers": None},
    "mixtral": {"rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": None, "num_local_experts": 8,
                "num_experts_per_tok": 2},
    "qwen3_moe": {"sliding_window": 4096, "use_sliding_window": False, "num_experts": 128, "num_experts_per_tok": 8,
                  "moe_intermediate_size": 768, "norm_topk_prob": False, "decoder_sparse_step": 1,
                  "mlp_only_layers": None},
    # OlmoeConfig: experts of intermediate_size on every layer, q/k RMSNorm over all heads.
    "olmoe": {"rms_norm_eps": 1e-5, "num_experts": 64, "num_experts_per_tok": 8, "norm_topk_prob": False,
              "clip_qkv": None},
    # GraniteConfig: the four multipliers default to 1 (attention_multiplier replaces 1/sqrt(d)).
    "granite": {"embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
                "attention_multiplier": 1.0},
    # GraniteMoeConfig: Granite's multipliers, 8 experts of intermediate_size, 2 per token.
    "granitemoe": {"embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
                   "attention_multiplier": 1.0, "num_local_experts": 8, "num_experts_per_tok": 2},
    # GraniteMoeSharedConfig: GraniteMoe's, and no shared MLP unless shared_intermediate_size > 0.
    "granitemoeshared": {"embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
                         "attention_multiplier": 1.0, "num_local_experts": 8, "num_experts_per_tok": 2,
                         "shared_intermediate_size": 0},
    # Olmo2Config: no sliding window (Olmo3Config has them), attention_bias false.
    "olmo2": {"rms_norm_eps": 1e-5},
    # Olmo3Config: OLMo 2's, with layer_types defaulting to a window of 4096 on three layers of four.
    "olmo3": {"rms_norm_eps": 1e-5, "sliding_window": 4096},
    # Qwen2MoeConfig: q/k/v projections with biases (Qwen2's attention), a shared expert.
    "qwen2_moe": {"sliding_window": 4096, "use_sliding_window": False, "max_window_layers": 28, "num_experts": 60,
                  "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                  "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": None},
    # GptOssConfig: head_dim 64 whatever hidden_size / heads, biases on q/k/v/o, experts of
    # intermediate_size on every layer. The router's k is num_experts_per_tok: OpenAI's
    # experts_per_token, which the shipped config.json carries as well, is not read by transformers.
    # No default for the RoPE: see rope_params_by_layer_type.
    # StableLmConfig, PhiConfig, Starcoder2Config, CohereConfig: LayerNorm epsilons under their own keys.
    "stablelm": {"layer_norm_eps": 1e-5, "partial_rotary_factor": 0.25, "use_qkv_bias": False,
                 "use_parallel_residual": False, "qk_layernorm": False},
    "phi": {"layer_norm_eps": 1e-5, "partial_rotary_factor": 0.5, "hidden_act": "gelu_new", "qk_layernorm": False},
    "starcoder2": {"norm_epsilon": 1e-5, "hidden_act": "gelu_pytorch_tanh", "use_bias": True, "tie_word_embeddings": True},
    "cohere": {"layer_norm_eps": 1e-5, "logit_scale": 0.0625, "tie_word_embeddings": True, "use_qk_norm": False},
    # GPTNeoXConfig (4.x keys; transformers 5 moves the two RoPE ones into rope_parameters).
    "gpt_neox": {"layer_norm_eps": 1e-5, "rotary_pct": 0.25, "rotary_emb_base": 10000.0, "hidden_act": "gelu",
                 "use_parallel_residual": True, "attention_bias": True, "tie_word_embeddings": False},
    # GlmConfig and Glm4Config: half of each head rotated (interleaved pairs), q/k/v biases.
    "glm": {"rms_norm_eps": 1.5625e-07, "partial_rotary_factor": 0.5, "head_dim": 128, "attention_bias": True},
    "glm4": {"rms_norm_eps": 1.5625e-07, "partial_rotary_factor": 0.5, "head_dim": 128, "attention_bias": True},
    # DeepseekV2Config (transformers' own class) and DeepseekV3Config.
    "deepseek_v2": {"vocab_size": 32000, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 64, "n_shared_experts": 2,
                    "num_experts_per_tok": None, "moe_intermediate_size": 1407, "first_k_dense_replace": 0,
                    "moe_layer_freq": 1, "routed_scaling_factor": 1.0, "topk_method": "greedy", "n_group": None,
                    "topk_group": None, "norm_topk_prob": False, "scoring_func": "softmax", "rms_norm_eps": 1e-6},
    "deepseek_v3": {"vocab_size": 129280, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1,
                    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "first_k_dense_replace": 3,
                    "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4, "norm_topk_prob": True,
                    "rope_interleave": True, "rms_norm_eps": 1e-6},
    "gpt_oss": {"rms_norm_eps": 1e-5, "rope_theta": 150000.0, "sliding_window": 128, "head_dim": 64,
                "attention_bias": True, "num_local_experts": 128, "num_experts_per_tok": 4,
                "max_position_embeddings": 131072, "swiglu_alpha": 1.702, "swiglu_limit": 7.0},
}
ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Ministral3ForCausalLM": "ministral3",
         "Mistral3ForConditionalGeneration": None,
         "Qwen2ForCausalLM": "qwen2",
         "Qwen3ForCausalLM": "qwen3", "SmolLM3ForCausalLM": "smollm3", "GemmaForCausalLM": "gemma",
         "Gemma2ForCausalLM": "gemma2",
         "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3", "Phi3ForCausalLM": "phi3",
         "Llama4ForCausalLM": "llama4", "Llama4ForConditionalGeneration": "llama4",
         "MixtralForCausalLM": "mixtral", "Qwen3MoeForCausalLM": "qwen3_moe",
         "Qwen2MoeForCausalLM": "qwen2_moe", "OlmoeForCausalLM": "olmoe", "GptOssForCausalLM": "gpt_oss",
         "Olmo2ForCausalLM": "olmo2", "Olmo3ForCausalLM": "olmo3", "GraniteForCausalLM": "granite",
         "StableLmForCausalLM": "stablelm", "PhiForCausalLM": "phi", "Starcoder2ForCausalLM": "starcoder2",
         "CohereForCausalLM": "cohere", "GPTNeoXForCausalLM": "gpt_neox", "GlmForCausalLM": "glm",
         "Glm4ForCausalLM": "glm4", "GraniteMoeForCausalLM": "granitemoe",
         "GraniteMoeSharedForCausalLM": "granitemoeshared", "DeepseekV2ForCausalLM": "deepseek_v2",
         "DeepseekV3ForCausalLM": "deepseek_v3"}
LAYER_NORM_EPS_KEY = {"stablelm": "layer_norm_eps", "phi": "layer_norm_eps", "cohere": "layer_norm_eps",
                      "starcoder2": "norm_epsilon", "gpt_neox": "layer_norm_eps"}


class Config:
    def __init__(self, root):
        self.family = ARCHS[root["architectures"][0]]
        if root["architectures"][0] == "Mistral3ForConditionalGeneration":  # the text model's type decides
            self.family = {"ministral3": "ministral3", "mistral": "mistral"}[root["text_config"]["model_type"]]
        self.raw = dict(root.get("text_config", root))
        if "tie_word_embeddings" not in self.raw and "tie_word_embeddings" in root:
            self.raw["tie_word_embeddings"] = root["tie_word_embeddings"]
        self.defaults = dict(COMMON, **FAMILY_DEFAULTS[self.family])

    def get(self, key, default=None):
        if key in self.raw:
            return self.raw[key]  # an explicit null stays None
        return self.defaults.get(key, default)


# ---- RoPE: inverse frequencies and the cos/sin scale of each rope type ----------------------

def inv_freq_and_scale(params, dim, cfg):
    """params: {"rope_type", "rope_theta", ...}; dim: rotated dimensions per head."""
    base = float(params["rope_theta"])
    kind = params.get("rope_type", params.get("type", "default"))
    exps = np.arange(0, dim, 2, dtype=np.float64) / dim
    inv = 1.0 / base ** exps
    max_pos = cfg.get("max_position_embeddings")
    orig = params.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings", max_pos))
    if kind == "default":
        return inv, 1.0
    factor = float(params.get("factor", 1.0))
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        lo, hi = float(params.get("low_freq_factor", 1.0)), float(params.get("high_freq_factor", 4.0))
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > orig / lo, inv / factor, inv)
        if hi != lo:
            smooth = (orig / wavelen - lo) / (hi - lo)
            mid = (wavelen >= orig / hi) & (wavelen <= orig / lo)
            out = np.where(mid, (1 - smooth) * out / factor + smooth * out, out)
        return out, 1.0
    if kind == "yarn":
        # With original_max_position_embeddings in the rope parameters, the transformers versions
        # read for this scale by max_position_embeddings / original_max_position_embeddings instead
        # of `factor` (transformers issue 38224 reports a change since): the oracle takes only
        # configs where the two agree.
        if "original_max_position_embeddings" in params and max_pos / params["original_max_position_embeddings"] != factor:
            raise SystemExit("yarn: factor differs from max_position_embeddings / original_max_position_embeddings; "
                             "transformers versions disagree on which applies")
        def mscale(s, m=1.0):
            return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0
        ms, ms_all = params.get("mscale"), params.get("mscale_all_dim")
        attn = params.get("attention_factor")
        if attn is None:
            attn = mscale(factor, ms) / mscale(factor, ms_all) if ms and ms_all else mscale(factor)
        beta_fast, beta_slow = float(params.get("beta_fast") or 32), float(params.get("beta_slow") or 1)

        def corr_dim(rotations):  # the dimension whose wavelength makes `rotations` turns in orig
            return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))
        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if params.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        out = (inv / factor) * (1 - extrapolation) + inv * extrapolation
        return out, float(attn)
    if kind == "longrope":
        # Positions within original_max_position_embeddings only: the short factors.
        ext = np.asarray(params["short_factor"], dtype=np.float64)
        if "original_max_position_embeddings" in cfg.raw:
            factor = max_pos / cfg.raw["original_max_position_embeddings"]
        attn = params.get("attention_factor")
        if attn is None:
            attn = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        return 1.0 / (ext * base ** exps), float(attn)
    raise SystemExit(f"rope type {kind} not handled by the oracle")


def rope_params_by_layer_type(cfg):
    """{layer type: rope params} from rope_parameters (v5) or rope_theta / rope_scaling (v4)."""
    kinds = ("full_attention", "sliding_attention", "chunked_attention")
    p = cfg.get("rope_parameters")
    if cfg.family == "gpt_oss" and not p and not cfg.get("rope_scaling"):
        # GptOssConfig's default is yarn (factor 32, beta_fast 32, beta_slow 1, truncate False), with
        # original_max_position_embeddings 4096 in transformers 5 and without it in 4.x, whose yarn
        # then takes max_position_embeddings: the oracle takes only configs that say which.
        raise SystemExit("gpt_oss: config without rope_scaling or rope_parameters; "
                         "transformers versions disagree on the default yarn")
    if p and all(k in kinds for k in p):
        out = {}
        for k, v in p.items():
            out[k] = v if v is not None else {"rope_type": "default", "rope_theta": (
                cfg.get("rope_local_base_freq") if k == "sliding_attention" else cfg.get("rope_theta"))}
        return out
    if p:
        return {k: p for k in kinds}
    full = dict(cfg.get("rope_scaling") or {"rope_type": "default"})
    full["rope_theta"] = cfg.get("rotary_emb_base" if cfg.family == "gpt_neox" else "rope_theta")
    out = {k: full for k in kinds}
    if cfg.family == "gemma3":  # local layers: their own base, never scaled
        out["sliding_attention"] = {"rope_type": "default", "rope_theta": cfg.get("rope_local_base_freq")}
    if cfg.family == "olmo3":
        # Sliding layers: the plain RoPE at the same base, as OLMo-core trains the model and
        # transformers 4.57 ran it (its rotary_embs["sliding_attention"] has rope_type "default").
        out["sliding_attention"] = {"rope_type": "default", "rope_theta": cfg.get("rope_theta")}
    return out


# ---- layers: attention type and RoPE use ----------------------------------------------------

def layer_plan(cfg, n):
    fam = cfg.family
    use_rope = [True] * n
    if fam in ("smollm3", "llama4"):
        nrl = cfg.get("no_rope_layers")
        if nrl:
            use_rope = [bool(x) for x in nrl]
        else:
            k = cfg.get("no_rope_layer_interval")
            use_rope = [(i + 1) % k != 0 for i in range(n)]
    types = cfg.get("layer_types")
    if not types:
        window = cfg.get("sliding_window")
        if fam in ("qwen2", "qwen3", "smollm3"):
            w = window if cfg.get("use_sliding_window") else None
            types = ["sliding_attention" if w is not None and i >= cfg.get("max_window_layers") else "full_attention"
                     for i in range(n)]
        elif fam in ("qwen3_moe", "qwen2_moe"):  # the window only with use_sliding_window, then on every layer
            w = window if cfg.get("use_sliding_window") else None
            types = ["sliding_attention" if w is not None else "full_attention"] * n
        elif fam in ("olmoe", "olmo2"):
            types = ["full_attention"] * n
        elif fam == "olmo3":
            types = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n)]
        elif fam in ("mistral", "ministral3", "phi3", "mixtral", "starcoder2"):
            types = ["sliding_attention" if window is not None else "full_attention"] * n
        elif fam in ("gemma2", "gpt_oss"):
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
        elif fam == "gemma3":
            pat = cfg.get("sliding_window_pattern")
            types = ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n)]
        elif fam == "llama4":
            types = ["chunked_attention" if r else "full_attention" for r in use_rope]
        else:
            types = ["full_attention"] * n
    return types, use_rope


def mask(kind, T, cfg):
    q = np.arange(T)[:, None]
    k = np.arange(T)[None, :]
    m = k <= q
    if kind == "sliding_attention":
        m &= k > q - cfg.get("sliding_window")
    elif kind == "chunked_attention":
        c = cfg.get("attention_chunk_size")
        m &= (k // c) == (q // c)
    return m


# ---- the forward ----------------------------------------------------------------------------

def rms(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def act(name, x):
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    if name in ("gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu_fast"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1 + erf(x / math.sqrt(2)))
    raise SystemExit(f"activation {name} not handled by the oracle")


def rotate_half_split(x, cos, sin, rot):
    """x [T, H, D]: the first `rot` dims rotated in half-split pairs (i, i + rot/2)."""
    xr, rest = x[..., :rot], x[..., rot:]
    a, b = xr[..., :rot // 2], xr[..., rot // 2:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([a * c - b * s, b * c + a * s, rest], axis=-1)


def rotate_interleaved(x, cos, sin, rot):
    """x [T, H, D]: the first `rot` dims in pairs (2i, 2i+1) as complex numbers times e^(i theta)
    (Llama 4, Cohere; GLM on part of each head)."""
    out = x.copy()
    a, b = x[..., 0:rot:2], x[..., 1:rot:2]
    c, s = cos[:, None, :], sin[:, None, :]
    out[..., 0:rot:2] = a * c - b * s
    out[..., 1:rot:2] = a * s + b * c
    return out


def sparse_layer(cfg, l):
    """Whether layer l's MLP is the sparse block of experts."""
    if cfg.family in ("mixtral", "olmoe", "granitemoe", "granitemoeshared"):
        return True
    if cfg.family in ("qwen3_moe", "qwen2_moe"):
        only = cfg.get("mlp_only_layers") or []
        return l not in only and cfg.get("num_experts") > 0 and (l + 1) % cfg.get("decoder_sparse_step") == 0
    if cfg.family == "llama4":  # an explicit list, even empty, wins over the step
        moe = cfg.get("moe_layers")
        if moe is None:
            step = cfg.get("interleave_moe_layer_step")
            moe = range(step - 1, cfg.get("num_hidden_layers"), step)
        return l in moe
    return False


def granite_moe(cfg, W, block, x, act_name):
    """GraniteMoeMoE on x [T, H] (JetMoE's top-k gating): router.layer's logits, the k largest,
    a softmax over those k; expert e's input_linear [E, 2F, H] gives gate (first F) and up (last
    F), output_linear [E, H, F] the output."""
    k = cfg.get("num_experts_per_tok")
    logits = x @ W[block + "router.layer.weight"].T
    w_in, w_out = W[block + "input_linear.weight"], W[block + "output_linear.weight"]
    F = w_in.shape[1] // 2
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        chosen = sorted(range(logits.shape[1]), key=lambda e: (-logits[t, e], e))[:k]
        z = np.exp(logits[t, chosen] - logits[t, chosen].max())
        gates = z / z.sum()
        for g, e in zip(gates, chosen):
            h = w_in[e] @ x[t]
            out[t] += g * (w_out[e] @ (act(act_name, h[:F]) * h[F:]))
    return out


def experts_ffn(cfg, W, block, x, act_name):
    """The sparse block on x [T, H]: router softmax over every expert, the top-k by probability,
    renormalised (Mixtral always, the Qwen MoEs with norm_topk_prob), each chosen expert's gated
    MLP; Qwen2-MoE adds its shared expert, scaled by the sigmoid of its own one-row gate."""
    fam = cfg.family
    n_exp = cfg.get("num_local_experts") if fam == "mixtral" else cfg.get("num_experts")
    k = cfg.get("num_experts_per_tok")
    renorm = True if fam == "mixtral" else bool(cfg.get("norm_topk_prob"))
    logits = x @ W[block + "gate.weight"].T
    assert logits.shape[1] == n_exp
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = z / z.sum(axis=1, keepdims=True)
    names = ("w1", "w3", "w2") if fam == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        chosen = sorted(range(n_exp), key=lambda e: (-prob[t, e], e))[:k]
        total = sum(prob[t, e] for e in chosen)
        for e in chosen:
            p = f"{block}experts.{e}."
            gate = x[t] @ W[p + names[0] + ".weight"].T
            up = x[t] @ W[p + names[1] + ".weight"].T
            y = (act(act_name, gate) * up) @ W[p + names[2] + ".weight"].T
            out[t] += (prob[t, e] / total if renorm else prob[t, e]) * y
    if fam == "qwen2_moe":  # Qwen2MoeSparseMoeBlock: + sigmoid(shared_expert_gate(x)) * shared_expert(x)
        p = block + "shared_expert."
        gate = x @ W[p + "gate_proj.weight"].T
        up = x @ W[p + "up_proj.weight"].T
        shared = (act(act_name, gate) * up) @ W[p + "down_proj.weight"].T
        g = x @ W[block + "shared_expert_gate.weight"].T  # [T, 1]
        out += shared / (1.0 + np.exp(-g))
    return out


def llama4_moe(cfg, W, block, x, act_name):
    """Llama4TextMoe on x [T, H]: router logits x W^T (no bias), the top k per token (ties to the
    lower index), each chosen expert's score the sigmoid of its logit and every other expert's 0.
    Each expert e runs on its input scaled by its score, s x: h = s x @ gate_up_proj[e]
    ([E, H, 2F]), gate the first F columns of h and up the last F, (act(gate) * up) @
    down_proj[e] ([E, F, H]); an expert of score 0 gives 0. The routed sum plus the shared
    expert, a gated MLP of width F on the unscaled x, with no gate of its own."""
    k = cfg.get("num_experts_per_tok")
    logits = x @ W[block + "router.weight"].T  # [T, E]
    T, n_exp = logits.shape
    gate_up, down = W[block + "experts.gate_up_proj"], W[block + "experts.down_proj"]
    F = down.shape[1]
    assert 1 <= k <= n_exp and gate_up.shape == (n_exp, x.shape[1], 2 * F) and down.shape == (n_exp, F, x.shape[1])
    top = np.argsort(-logits, axis=1, kind="stable")[:, :k]  # stable: equal logits keep index order
    chosen = np.zeros((T, n_exp), dtype=bool)
    chosen[np.arange(T)[:, None], top] = True
    score = np.where(chosen, 1.0 / (1.0 + np.exp(-logits)), 0.0)
    p = block + "shared_expert."
    gate, up = x @ W[p + "gate_proj.weight"].T, x @ W[p + "up_proj.weight"].T
    out = (act(act_name, gate) * up) @ W[p + "down_proj.weight"].T
    for e in range(n_exp):
        rows = np.nonzero(chosen[:, e])[0]
        h = (x[rows] * score[rows, e:e + 1]) @ gate_up[e]
        out[rows] += (act(act_name, h[:, :F]) * h[:, F:]) @ down[e]
    return out


# FP4 E2M1 by its 4-bit code: sign bit 3, then 2 exponent bits and 1 mantissa bit.
FP4_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def mxfp4_dequantize(blocks, scales):
    """MXFP4 blocks U8 [E, rows, cols / 32, 16] and scales U8 [E, rows, cols / 32] to float64
    [E, cols, rows]. Each byte holds two FP4 codes, the low nibble the earlier element; each group
    of 32 elements is scaled by 2 ** (its scale byte - 127). The [E, rows, cols] this makes (rows
    the outputs, as nn.Linear keeps them) is transposed to the [E, in, out] that GptOssExperts
    multiplies by, as transformers' dequantizer (integrations/mxfp4.py) leaves it."""
    E, R, G, B = blocks.shape
    assert scales.shape == (E, R, G), (blocks.shape, scales.shape)
    vals = np.empty((E, R, G, 2 * B))
    vals[..., 0::2] = FP4_E2M1[blocks & 0x0F]
    vals[..., 1::2] = FP4_E2M1[blocks >> 4]
    vals = np.ldexp(vals, scales.astype(np.int64)[..., None] - 127)
    return vals.reshape(E, R, G * 2 * B).transpose(0, 2, 1)


def gpt_oss_experts(cfg, W, block, x):
    """GptOssMLP on x [T, H]: router logits x W^T + b, the top k of them (num_experts_per_tok),
    a softmax over those k only. Each chosen expert: h = x @ gate_up_proj[e] + its bias, the even
    columns of h the gate and the odd ones the up; the gate clamped from above at swiglu_limit,
    the up on both sides; ((up + 1) * gate * sigmoid(alpha * gate)) @ down_proj[e] + its bias. The
    experts come dequantized (gate_up_proj [E, H, 2F], down_proj [E, F, H]) or as MXFP4
    *_blocks / *_scales; no shared expert."""
    alpha, limit = cfg.get("swiglu_alpha"), cfg.get("swiglu_limit")
    if (alpha, limit) != (1.702, 7.0):
        # GptOssExperts has 1.702 and 7.0 as constants in the transformers versions read for this,
        # while the MXFP4 kernel path and the newest config take them from the config.
        raise SystemExit("gpt_oss: swiglu_alpha / swiglu_limit other than 1.702 / 7.0; "
                         "transformers versions disagree on whether they apply")
    k = cfg.get("num_experts_per_tok")
    e = block + "experts."
    if e + "gate_up_proj" in W:
        gate_up, down = W[e + "gate_up_proj"], W[e + "down_proj"]
    else:
        gate_up = mxfp4_dequantize(W[e + "gate_up_proj_blocks"], W[e + "gate_up_proj_scales"])
        down = mxfp4_dequantize(W[e + "down_proj_blocks"], W[e + "down_proj_scales"])
    gate_up_bias, down_bias = W[e + "gate_up_proj_bias"], W[e + "down_proj_bias"]
    logits = x @ W[block + "router.weight"].T + W[block + "router.bias"]
    n_exp = logits.shape[1]
    assert gate_up.shape[:2] == (n_exp, x.shape[1]) and down.shape == (n_exp, gate_up.shape[2] // 2, x.shape[1])
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        chosen = sorted(range(n_exp), key=lambda j: (-logits[t, j], j))[:k]
        z = np.exp(logits[t, chosen] - logits[t, chosen].max())
        for weight, j in zip(z / z.sum(), chosen):
            h = x[t] @ gate_up[j] + gate_up_bias[j]
            gate, up = np.minimum(h[0::2], limit), np.clip(h[1::2], -limit, limit)
            glu = gate / (1.0 + np.exp(-alpha * gate))
            out[t] += weight * (((up + 1.0) * glu) @ down[j] + down_bias[j])
    return out


def deepseek_route(cfg, logits, bias):
    """One row's experts and weights: V2 softmax (greedy or the best groups by their maximum), V3
    sigmoid chosen with the bias within the groups of the best two-score sums."""
    g = cfg.get
    E, k = len(logits), g("num_experts_per_tok")
    v3 = cfg.family == "deepseek_v3"
    if v3:
        scores = 1 / (1 + np.exp(-logits))
        choice = scores + bias
        groups, used = g("n_group"), g("topk_group")
    else:
        e = np.exp(logits - logits.max())
        scores = e / e.sum()
        choice = scores
        grouped = g("topk_method") == "group_limited_greedy"
        groups, used = (g("n_group"), g("topk_group")) if grouped else (1, 1)
    allowed = np.ones(E, dtype=bool)
    if groups and groups > 1:
        per = choice.reshape(groups, E // groups)
        gs = np.sort(per, axis=1)[:, ::-1]
        gscore = gs[:, :2].sum(axis=1) if v3 else gs[:, 0]
        best = sorted(range(groups), key=lambda i: (-gscore[i], i))[:used]
        allowed = np.zeros(E, dtype=bool)
        for i in best:
            allowed[i * (E // groups):(i + 1) * (E // groups)] = True
    order = sorted((i for i in range(E) if allowed[i]), key=lambda i: (-choice[i], i))[:k]
    w = scores[order]
    if g("norm_topk_prob"):
        w = w / w.sum()
    return order, w * g("routed_scaling_factor")


def deepseek_forward(cfg, W, ids):
    g = cfg.get
    H, L, Hq = g("hidden_size"), g("num_hidden_layers"), g("num_attention_heads")
    N, R, V, Lkv = g("qk_nope_head_dim"), g("qk_rope_head_dim"), g("v_head_dim"), g("kv_lora_rank")
    eps = g("rms_norm_eps")
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    params = dict(g("rope_scaling") or g("rope_parameters") or {"rope_type": "default"})
    params.setdefault("rope_theta", g("rope_theta"))
    inv, mult = inv_freq_and_scale(params, R, cfg)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang) * mult, np.sin(ang) * mult
    interleaved = cfg.family == "deepseek_v2" or g("rope_interleave")
    scale = (N + R) ** -0.5
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "yarn" and params.get("mscale_all_dim"):
        f, m = float(params["factor"]), float(params["mscale_all_dim"])
        ms = 1.0 if f <= 1 else 0.1 * m * math.log(f) + 1.0
        scale = scale * ms * ms

    def lin(x, name):
        return x @ W[name + ".weight"].T

    def rope(x):  # x [T, heads, R]
        return rotate_interleaved(x, cos, sin, R) if interleaved else rotate_half_split(x, cos, sin, R)

    def mlp(x, name):
        return lin(act("silu", lin(x, name + "gate_proj")) * lin(x, name + "up_proj"), name + "down_proj")

    x = W["model.embed_tokens.weight"][ids]
    causal = np.tril(np.ones((T, T), dtype=bool))
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(x, eps) * W[p + "input_layernorm.weight"]
        a = p + "self_attn."
        if g("q_lora_rank"):
            q = lin(rms(lin(h, a + "q_a_proj"), eps) * W[a + "q_a_layernorm.weight"], a + "q_b_proj")
        else:
            q = lin(h, a + "q_proj")
        q = q.reshape(T, Hq, N + R)
        ckv = lin(h, a + "kv_a_proj_with_mqa")
        latent, k_pe = ckv[:, :Lkv], ckv[:, Lkv:].reshape(T, 1, R)
        kv = lin(rms(latent, eps) * W[a + "kv_a_layernorm.weight"], a + "kv_b_proj").reshape(T, Hq, N + V)
        k_nope, v = kv[:, :, :N], kv[:, :, N:]
        q = np.concatenate([q[:, :, :N], rope(q[:, :, N:])], axis=-1)
        k = np.concatenate([k_nope, np.repeat(rope(k_pe), Hq, axis=1)], axis=-1)
        out = np.empty((T, Hq, V))
        for hq in range(Hq):
            sc = np.where(causal, (q[:, hq, :] @ k[:, hq, :].T) * scale, -np.inf)
            sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
            out[:, hq, :] = (sc / sc.sum(axis=-1, keepdims=True)) @ v[:, hq, :]
        x = x + lin(out.reshape(T, Hq * V), a + "o_proj")
        f_in = rms(x, eps) * W[p + "post_attention_layernorm.weight"]
        nr = g("n_routed_experts")
        freq = 1 if cfg.family == "deepseek_v3" else g("moe_layer_freq")
        if nr and l >= g("first_k_dense_replace") and l % freq == 0:
            m = p + "mlp."
            logits = lin(f_in, m + "gate")
            bias = W.get(m + "gate.e_score_correction_bias")
            y = np.zeros_like(f_in)
            for t in range(T):
                order, w = deepseek_route(cfg, logits[t], bias)
                for e, wt in zip(order, w):
                    y[t] += wt * mlp(f_in[t:t + 1], m + f"experts.{e}.")[0]
            if g("n_shared_experts"):
                y = y + mlp(f_in, m + "shared_experts.")
            x = x + y
        else:
            x = x + mlp(f_in, p + "mlp.")
    x = rms(x, eps) * W["model.norm.weight"]
    head = W["model.embed_tokens.weight" if g("tie_word_embeddings") else "lm_head.weight"]
    return x @ head.T, x


def forward(cfg, W, ids):
    """Returns (logits [T, vocab], final hidden states [T, hidden])."""
    fam = cfg.family
    if fam in ("deepseek_v2", "deepseek_v3"):
        return deepseek_forward(cfg, W, ids)
    g = cfg.get
    H, L, Hq = g("hidden_size"), g("num_hidden_layers"), g("num_attention_heads")
    Hkv = g("num_key_value_heads") or Hq
    D = g("head_dim") or H // Hq
    layer_norm = fam in LAYER_NORM_EPS_KEY  # nn.LayerNorm (biased variance), CohereLayerNorm (no bias)
    eps = g(LAYER_NORM_EPS_KEY.get(fam, "rms_norm_eps"))
    if g("qk_layernorm") or (fam == "cohere" and g("use_qk_norm")):
        raise SystemExit(f"{fam}: per-head q/k LayerNorms not handled by the oracle")
    parallel = fam in ("phi", "cohere") or (fam in ("stablelm", "gpt_neox") and g("use_parallel_residual"))
    neox = fam == "gpt_neox"  # GPTNeoXForCausalLM: its own module names, q|k|v fused per head
    gemma = fam in ("gemma2", "gemma3")
    any_gemma = gemma or fam == "gemma"  # (1 + w) norms, sqrt(hidden) embedding, hidden_activation
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)

    def norm(x, w, b=None):
        if layer_norm:
            c = x - x.mean(axis=-1, keepdims=True)
            y = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps) * w
            return y if b is None else y + b
        return rms(x, eps) * ((1.0 + w) if any_gemma else w)

    def block_norm(x, name):  # a norm module by name, with its bias when it has one
        return norm(x, W[name + ".weight"], W.get(name + ".bias"))

    def lin(x, name, bias=True):
        y = x @ W[name + ".weight"].T
        if bias and name + ".bias" in W:
            y = y + W[name + ".bias"]
        return y

    types, use_rope = layer_plan(cfg, L)
    rope_by_type = rope_params_by_layer_type(cfg)
    glm = fam in ("glm", "glm4")  # GlmAttention: rotary_dim = head_dim * partial_rotary_factor, interleaved pairs
    rot = int(D * (g("partial_rotary_factor") or 1.0))
    if glm:  # transformers 5 keeps partial_rotary_factor in rope_parameters
        rot = int(D * (g("rope_parameters") or {}).get("partial_rotary_factor", g("partial_rotary_factor")))
    if neox:  # rotary_pct (4.x) or rope_parameters.partial_rotary_factor (5.x)
        rot = int(D * (g("rope_parameters") or {}).get("partial_rotary_factor", g("rotary_pct")))
    act_name = g("hidden_activation") if any_gemma else g("hidden_act")
    scale = g("query_pre_attn_scalar") ** -0.5 if gemma else D ** -0.5
    granite = fam in ("granite", "granitemoe", "granitemoeshared")
    if granite:  # GraniteAttention: the scaling is attention_multiplier itself
        scale = g("attention_multiplier")
    # GraniteDecoderLayer: each sublayer's output times residual_multiplier before the residual add.
    rm = g("residual_multiplier") if granite else 1.0
    cap = g("attn_logit_softcapping") if gemma else None

    x = W["gpt_neox.embed_in.weight"][ids] if neox else W.get("model.embed_tokens.weight", W.get("lm_head.weight"))[ids]
    if any_gemma:
        x = x * math.sqrt(H)
    if granite:
        x = x * g("embedding_multiplier")
    for l in range(L):
        p = f"gpt_neox.layers.{l}." if neox else f"model.layers.{l}."
        # Olmo2DecoderLayer: no norm on the way in; its two norms act on the sublayers' outputs.
        h = x if fam in ("olmo2", "olmo3") else block_norm(x, p + "input_layernorm")
        if neox:  # query_key_value rows: per head, D of q, then k, then v
            qkv = lin(h, p + "attention.query_key_value").reshape(T, Hq, 3 * D)
            q, k, v = (qkv[:, :, i * D:(i + 1) * D].reshape(T, Hq * D) for i in range(3))
        elif fam == "phi3":
            qkv = lin(h, p + "self_attn.qkv_proj")
            q, k, v = qkv[:, :Hq * D], qkv[:, Hq * D:(Hq + Hkv) * D], qkv[:, (Hq + Hkv) * D:]
        else:
            q, k, v = (lin(h, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        if fam in ("olmoe", "olmo2", "olmo3"):  # q_norm(q_proj(h)), k_norm(k_proj(h)) over the whole projection
            q = norm(q, W[p + "self_attn.q_norm.weight"])
            k = norm(k, W[p + "self_attn.k_norm.weight"])
        q, k, v = q.reshape(T, Hq, D), k.reshape(T, Hkv, D), v.reshape(T, Hkv, D)
        if fam in ("qwen3", "gemma3", "qwen3_moe"):
            q = norm(q, W[p + "self_attn.q_norm.weight"])
            k = norm(k, W[p + "self_attn.k_norm.weight"])
        if use_rope[l]:
            inv, mult = inv_freq_and_scale(rope_by_type[types[l]], rot, cfg)
            ang = pos[:, None] * inv[None, :]
            cos, sin = np.cos(ang) * mult, np.sin(ang) * mult
            if fam in ("llama4", "cohere") or glm:  # repeat-interleaved frequencies, pairs (2i, 2i+1)
                q, k = rotate_interleaved(q, cos, sin, rot), rotate_interleaved(k, cos, sin, rot)
                if g("use_qk_norm"):  # Llama4TextL2Norm: no weight, on RoPE layers only
                    q, k = rms(q, eps), rms(k, eps)
            else:
                q, k = rotate_half_split(q, cos, sin, rot), rotate_half_split(k, cos, sin, rot)
            if fam == "ministral3":  # Ministral3Attention: every layer, after RoPE, at pos (not pos + 1)
                rp = rope_by_type[types[l]]
                temp = 1 + rp["llama_4_scaling_beta"] * np.log1p(np.floor(pos / rp["original_max_position_embeddings"]))
                q = q * temp[:, None, None]
        elif fam == "llama4" and g("attn_temperature_tuning"):
            temp = np.log1p(np.floor((pos + 1) / g("floor_scale"))) * g("attn_scale") + 1
            q = q * temp[:, None, None]
        m = mask(types[l], T, cfg)
        sinks = W[p + "self_attn.sinks"] if fam == "gpt_oss" else None
        out = np.empty((T, Hq, D))
        for hq in range(Hq):
            kv = hq // (Hq // Hkv)
            s = (q[:, hq, :] @ k[:, kv, :].T) * scale
            if cap:
                s = np.tanh(s / cap) * cap
            s = np.where(m, s, -np.inf)
            if sinks is not None:
                # GptOss: the head's sink is one more logit in each row's softmax, whose weight
                # goes to no value: the row's weights on the keys sum to less than 1.
                s = np.concatenate([s, np.full((T, 1), sinks[hq])], axis=1)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s = s[:, :-1] / s.sum(axis=-1, keepdims=True)
            else:
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s = s / s.sum(axis=-1, keepdims=True)
            out[:, hq, :] = s @ v[:, kv, :]
        a = lin(out.reshape(T, Hq * D), p + ("self_attn.dense" if fam == "phi" else "attention.dense" if neox else "self_attn.o_proj"))
        if gemma:
            a = norm(a, W[p + "post_attention_layernorm.weight"])
            f_in = norm(x + a, W[p + "pre_feedforward_layernorm.weight"])
        elif fam in ("olmo2", "olmo3"):
            a = norm(a, W[p + "post_attention_layernorm.weight"])
            f_in = x + a
        elif parallel and neox:  # GPTNeoXLayer: the MLP on post_attention_layernorm of the layer input
            f_in = block_norm(x, p + "post_attention_layernorm")
        elif parallel:  # attention and the MLP both on the input norm's output
            f_in = h
        elif fam == "glm4":  # Glm4DecoderLayer: the attention's output normed before the residual add
            a = norm(a, W[p + "post_self_attn_layernorm.weight"])
            f_in = block_norm(x + a, p + "post_attention_layernorm")
        else:
            f_in = block_norm(x + a * rm, p + "post_attention_layernorm")
        x = x + a * rm
        if fam == "gpt_oss":
            x = x + gpt_oss_experts(cfg, W, p + "mlp.", f_in)
            continue
        mlp = p + ("feed_forward." if fam == "llama4" else "mlp.")
        if sparse_layer(cfg, l):
            if fam == "llama4":
                x = x + llama4_moe(cfg, W, mlp, f_in, act_name)
            elif fam in ("granitemoe", "granitemoeshared"):  # the experts' output times residual_multiplier
                y = granite_moe(cfg, W, p + "block_sparse_moe.", f_in, act_name)
                if fam == "granitemoeshared" and g("shared_intermediate_size") > 0:
                    # GraniteMoeSharedMLP on the same input, added ungated: input_linear's first
                    # half the gate, the second the up.
                    hs = lin(f_in, p + "shared_mlp.input_linear")
                    Fs = hs.shape[1] // 2
                    y = y + lin(act(act_name, hs[:, :Fs]) * hs[:, Fs:], p + "shared_mlp.output_linear")
                x = x + y * rm
            else:
                block = p + ("block_sparse_moe." if fam == "mixtral" else "mlp.")
                x = x + experts_ffn(cfg, W, block, f_in, act_name)
            continue
        if fam in ("phi", "starcoder2", "gpt_neox"):  # no gate: fc1 -> act -> fc2 (c_fc -> act -> c_proj)
            up, down = {"phi": ("fc1", "fc2"), "starcoder2": ("c_fc", "c_proj"), "gpt_neox": ("dense_h_to_4h", "dense_4h_to_h")}[fam]
            x = x + lin(act(act_name, lin(f_in, mlp + up)), mlp + down)
            continue
        if fam == "phi3" or glm:
            gu = lin(f_in, mlp + "gate_up_proj")
            half = gu.shape[1] // 2
            gate, up = gu[:, :half], gu[:, half:]
        else:
            gate, up = lin(f_in, mlp + "gate_proj"), lin(f_in, mlp + "up_proj")
        f = lin(act(act_name, gate) * up, mlp + "down_proj")
        if gemma or fam in ("olmo2", "olmo3"):
            f = norm(f, W[p + "post_feedforward_layernorm.weight"])
        if fam == "glm4":
            f = norm(f, W[p + "post_mlp_layernorm.weight"])
        x = x + f * rm
    x = block_norm(x, "model.final_layernorm" if fam == "phi" else "gpt_neox.final_layer_norm" if neox else "model.norm")
    tied = g("tie_word_embeddings")
    # A tied embedding may be stored only under its alias lm_head.weight.
    head = W.get("model.embed_tokens.weight" if tied else "lm_head.weight", W.get("lm_head.weight"))
    if neox:
        head = W["gpt_neox.embed_in.weight" if tied else "embed_out.weight"]
    logits = x @ head.T
    if granite:  # GraniteForCausalLM, GraniteMoeForCausalLM
        logits = logits / g("logits_scaling")
    if fam == "phi":  # lm_head has a bias
        logits = logits + W["lm_head.bias"]
    if fam == "cohere":
        logits = logits * g("logit_scale")
    final_cap = g("final_logit_softcapping") if gemma else None
    if final_cap:
        logits = np.tanh(logits / final_cap) * final_cap
    return logits, x


def main(argv):
    if len(argv) not in (4, 5):
        raise SystemExit(__doc__)
    model_dir, ids, out = argv[1], [int(t) for t in argv[2].split(",")], argv[3]
    with open(model_dir + "/config.json") as f:
        cfg = Config(json.load(f))
    W = {}
    for name, a in read_safetensors(model_dir + "/model.safetensors").items():
        # Multimodal classes keep the text model under model.language_model. (transformers 5) or
        # language_model.model. (4.x); vision tensors are not read.
        for old, new in (("model.language_model.", "model."), ("language_model.model.", "model."),
                         ("language_model.lm_head.", "lm_head.")):
            if name.startswith(old):
                name = new + name[len(old):]
        W[name] = a
    with np.errstate(over="ignore"):
        logits, hidden = forward(cfg, W, ids)
    np.ascontiguousarray(logits, dtype="<f8").tofile(out)
    if len(argv) == 5:
        np.ascontiguousarray(hidden, dtype="<f8").tofile(argv[4])


if __name__ == "__main__":
    main(sys.argv)
