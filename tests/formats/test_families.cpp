// The table of model families (formats/families.h): every row is reachable by its names, the
// names are unique, every GGUF architecture a family writes has a row that reads it, and
// unknown architectures are refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/tensor.h"
#include "formats/families.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config.h"
#include "../scratch_dir.h"

namespace ptn {
namespace {

TEST(Families, EveryRowIsFoundByItsNames) {
  std::set<std::string> names, hf, gguf_read;
  for (const FamilyInfo& f : all_families()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(&family_info(f.id), &f) << f.name;
    EXPECT_EQ(find_family(f.name), &f) << f.name;
    EXPECT_FALSE(f.hf_architectures.empty()) << f.name;
    for (const std::string& a : f.hf_architectures) {
      EXPECT_TRUE(hf.insert(a).second) << a;
      EXPECT_EQ(find_family_by_hf_arch(a), &f) << a;
    }
    if (f.gguf_reads) {
      EXPECT_TRUE(gguf_read.insert(f.gguf_arch).second) << f.gguf_arch;
      EXPECT_EQ(find_family_by_gguf_arch(f.gguf_arch), &f) << f.gguf_arch;
    }
    if (f.block == Block::Unsupported) {
      EXPECT_STRNE(f.unsupported_why, "") << f.name;
    }
    if (f.hf_window == WindowRule::EveryNthGlobal || f.gguf_window == WindowRule::EveryNthGlobal) {
      EXPECT_GT(f.window_pattern, 0) << f.name;
    }
  }
  for (const FamilyInfo& f : all_families()) {
    if (*f.gguf_arch) {
      EXPECT_NE(find_family_by_gguf_arch(f.gguf_arch), nullptr) << f.name << " writes " << f.gguf_arch << ", which no row reads";
    }
  }
  EXPECT_EQ(find_family("no-such-family"), nullptr);
  EXPECT_EQ(find_family_by_hf_arch("FalconForCausalLM"), nullptr);
  EXPECT_EQ(find_family_by_gguf_arch("mistral"), nullptr);  // Mistral GGUFs are "llama"
  EXPECT_EQ(find_family_by_gguf_arch("llama")->id, Family::Llama);
}

TEST(Families, TheListsNameWhatIsSupported) {
  EXPECT_EQ(supported_family_list(), "Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3, Phi-3, SmolLM3, Llama 4, Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE, OLMo 2, OLMo 3, Granite, gpt-oss, DeepSeek V2, DeepSeek V3, StableLM, Phi-2, Starcoder2, Cohere, GPT-NeoX, GLM, GLM-4, Granite MoE, Granite MoE Shared, Ministral 3");
  EXPECT_EQ(gguf_readable_arch_list(), "llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, smollm3, llama4, qwen3moe, qwen2moe, olmoe, olmo2, granite, gpt-oss, deepseek2, stablelm, phi2, starcoder2, command-r, gptneox, chatglm, glm4, granitemoe, mistral3");
  EXPECT_EQ(gguf_writable_family_list(), "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, smollm3, llama4, mixtral, qwen3_moe, qwen2_moe, olmoe, olmo2, olmo3, granite, gpt_oss, deepseek_v2, deepseek_v3, stablelm, phi2, starcoder2, cohere, gptneox, glm, glm4, granitemoe, granitemoeshared, ministral3");
}

TEST(Families, EveryHfTensorNameIsAnHfName) {
  for (const FamilyInfo& f : all_families()) {
    std::set<std::string> canonical;
    for (const HfLayerTensor& t : f.hf_names.layer) {
      EXPECT_TRUE(canonical.insert(t.canonical).second) << f.name << ": " << t.canonical << " twice";
      EXPECT_NE(std::string(t.hf).find('.'), std::string::npos) << f.name << ": " << t.hf;
    }
    for (const std::string must : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                   "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) {
      // gpt-oss has experts on every layer (hf_config.cpp maps them), never a dense MLP.
      if (f.hf_moe == HfMoe::GptOss && must.rfind("ffn_", 0) == 0 && must != "ffn_norm.weight") continue;
      // OLMo 2 has post-norms instead (checked below).
      if (f.no_pre_norms && (must == "attn_norm.weight" || must == "ffn_norm.weight")) continue;
      // Phi-2: one norm for attention and the MLP; Phi-2 and Starcoder2: an MLP without a gate.
      if ((f.parallel_residual && must == "ffn_norm.weight") || (f.plain_mlp && must == "ffn_gate.weight")) continue;
      // DeepSeek: keys and values from the latent (checked below).
      if (f.hf_mla && (must == "attn_k.weight" || must == "attn_v.weight")) continue;
      EXPECT_TRUE(canonical.count(must)) << f.name << " has no HF name for " << must;
    }
    if (f.hf_mla) {
      for (const char* must : {"attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight", "attn_kv_a_mqa.weight",
                               "attn_kv_a_norm.weight", "attn_k_b.weight", "attn_v_b.weight"})
        EXPECT_TRUE(canonical.count(must)) << f.name << " has no HF name for " << must;
    }
    if (f.sandwich_norms) {
      EXPECT_TRUE(canonical.count("post_attention_norm.weight") && canonical.count("post_ffw_norm.weight"))
          << f.name << " has post-norms but no HF names for them";
    }
    if (f.attn_sinks) {
      EXPECT_TRUE(canonical.count("attn_sinks.weight")) << f.name << " has sinks but no HF name for them";
    }
  }
}

TEST(Families, UnknownArchitecturesAreRefusedByName) {
  try {
    model_spec_from_hf_config(nlohmann::json::parse(R"({"architectures": ["FalconForCausalLM"]})"), "cfg.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'FalconForCausalLM' is not supported (Llama, Mistral"), std::string::npos) << e.what();
  }
  const testing::ScratchDir dir("ptn_families_");
  GgufWriter w;
  w.set_string("general.architecture", "mamba");
  w.write(dir.path() + "/mamba.gguf");
  try {
    model_spec_from_gguf(*GgufFile::open(dir.path() + "/mamba.gguf"));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'mamba' is not supported (ptn reads llama, qwen2"), std::string::npos) << e.what();
  }
  ModelSpec s;
  s.family = "mamba2";  // a family ptn does not know has no GGUF writer
  try {
    gguf_arch_for(s);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("family 'mamba2' has no GGUF writer"), std::string::npos) << e.what();
  }
}

// llama.cpp's graphs have parts ptn does not run: glm4's multi-token-prediction layers counted
// in block_count (GLM-OCR) and M-RoPE sections (GLM-4V); a shared expert where the architecture
// has none (qwen3moe). Such files are refused by name.
TEST(Families, GgufFilesWithPartsPtnDoesNotRunAreRefused) {
  const testing::ScratchDir dir("ptn_families_");
  // A file of `arch` with the dimensions the reader needs before these checks, and `extra` keys.
  auto write = [&](const std::string& name, const std::string& arch, const std::function<void(GgufWriter&)>& extra) {
    GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set_u32(arch + ".block_count", 2);
    w.set_u32(arch + ".embedding_length", 64);
    w.set_u32(arch + ".feed_forward_length", 128);
    w.set_u32(arch + ".attention.head_count", 4);
    w.set_u32(arch + ".attention.head_count_kv", 2);
    w.set_u32(arch + ".rope.dimension_count", 8);
    extra(w);
    w.add_tensor("token_embd.weight", Tensor::zeros(DType::F32, {32, 64}));
    const std::string path = dir.path() + "/" + name + ".gguf";
    w.write(path);
    return path;
  };
  auto expect_refused = [](const std::string& path, const std::string& what) {
    try {
      model_spec_from_gguf(*GgufFile::open(path));
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_refused(write("nextn", "glm4", [](GgufWriter& w) { w.set_u32("glm4.nextn_predict_layers", 1); }),
                 "key 'glm4.nextn_predict_layers'");
  expect_refused(write("mrope", "glm4", [](GgufWriter& w) { w.set_i32_array("glm4.rope.dimension_sections", {8, 12, 12, 0}); }),
                 "M-RoPE");
  // llama.cpp's qwen3moe has no shared expert (granitemoe's is read: Granite MoE Shared).
  expect_refused(write("shexp", "qwen3moe",
                       [](GgufWriter& w) {
                         w.set_u32("qwen3moe.expert_count", 4);
                         w.set_u32("qwen3moe.expert_used_count", 2);
                         w.set_u32("qwen3moe.expert_shared_feed_forward_length", 48);
                       }),
                 "key 'qwen3moe.expert_shared_feed_forward_length'");
  // llama.cpp's mistral3 with experts (Mistral Large 3) is refused by name.
  expect_refused(write("m3moe", "mistral3",
                       [](GgufWriter& w) {
                         w.set_u32("mistral3.expert_count", 4);
                         w.set_u32("mistral3.expert_used_count", 2);
                       }),
                 "mixture-of-experts Ministral 3 files");
  // Zero sections (what a converter writes for a text-only model) and no NextN layers pass this check.
  const std::string plain = write("plain", "glm4", [](GgufWriter& w) {
    w.set_u32("glm4.nextn_predict_layers", 0);
    w.set_i32_array("glm4.rope.dimension_sections", {0, 0, 0, 0});
  });
  try {
    model_spec_from_gguf(*GgufFile::open(plain));
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("M-RoPE"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("nextn"), std::string::npos) << e.what();
  }
}

// llama.cpp's converter writes Ministral 3 as mistral3 with yarn_log_multiplier (transformers'
// mscale_all_dim, mscale taken as 1) and the temperature's beta; the period is yarn's original
// context. rope.scaling.attn_factor multiplies the factor that gives.
TEST(Families, Mistral3GgufKeysAsLlamaCppWritesThem) {
  const testing::ScratchDir dir("ptn_families_");
  auto spec = [&](const std::function<void(GgufWriter&)>& extra) {
    GgufWriter w;
    w.set_string("general.architecture", "mistral3");
    w.set_u32("mistral3.block_count", 1);
    w.set_u32("mistral3.embedding_length", 64);
    w.set_u32("mistral3.feed_forward_length", 128);
    w.set_u32("mistral3.attention.head_count", 4);
    w.set_u32("mistral3.attention.head_count_kv", 2);
    w.set_string("mistral3.rope.scaling.type", "yarn");
    w.set_f32("mistral3.rope.scaling.factor", 16.0f);
    w.set_u32("mistral3.rope.scaling.original_context_length", 16384);
    extra(w);
    w.add_tensor("token_embd.weight", Tensor::zeros(DType::F32, {32, 64}));
    w.add_tensor("output_norm.weight", Tensor::zeros(DType::F32, {64}));
    const std::pair<const char*, std::vector<int64_t>> layer[] = {
        {"attn_norm", {64}}, {"attn_q", {64, 64}}, {"attn_k", {32, 64}}, {"attn_v", {32, 64}}, {"attn_output", {64, 64}},
        {"ffn_norm", {64}},  {"ffn_gate", {128, 64}}, {"ffn_up", {128, 64}}, {"ffn_down", {64, 128}}};
    for (const auto& [n, shape] : layer) w.add_tensor(std::string("blk.0.") + n + ".weight", Tensor::zeros(DType::F32, shape));
    const std::string path = dir.path() + "/m3.gguf";
    w.write(path);
    return model_spec_from_gguf(*GgufFile::open(path));
  };
  ModelSpec s = spec([](GgufWriter& w) {
    w.set_f32("mistral3.rope.scaling.yarn_log_multiplier", 1.0f);
    w.set_f32("mistral3.attention.temperature_scale", 0.1f);
  });
  EXPECT_EQ(s.family, "ministral3");
  EXPECT_FLOAT_EQ(s.rope_scaling.attn_factor, 1.0f);  // mscale(16, 1) / mscale(16, 1)
  EXPECT_FLOAT_EQ(s.attn_temperature_scale, 0.1f);
  EXPECT_EQ(s.attn_temperature_floor, 16384);
  EXPECT_TRUE(s.attn_temperature_all_layers);
  s = spec([](GgufWriter& w) { w.set_f32("mistral3.rope.scaling.attn_factor", 0.5f); });
  EXPECT_NEAR(s.rope_scaling.attn_factor, 0.5 * (0.1 * std::log(16.0) + 1.0), 1e-6);  // times yarn's default
  EXPECT_EQ(s.attn_temperature_scale, 0.0f);
}

}  // namespace
}  // namespace ptn
