// GGUF writer: what it writes reads back identically; the Q4_K_M mix and its bytes match the
// file llama.cpp's llama-quantize made from the same stories260K weights.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/quant.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/gguf_writer.h"
#include "formats/weights.h"

namespace ptn {
namespace {

const std::string kModel = std::string(PTN_SOURCE_DIR) + "/models/stories260K";

std::string tmp_path(const std::string& name) {
  return (::testing::TempDir().empty() ? std::string("/tmp/") : ::testing::TempDir()) + "ptn_gguf_writer_" + std::to_string(getpid()) + "_" + name;
}

TEST(GgufWriter, ScalarsArraysAndTensorsRoundTrip) {
  GgufWriter w(64);
  w.set_u32("a.u32", 7);
  w.set_i32("a.i32", -3);
  w.set_u64("a.u64", 1ull << 40);
  w.set_f32("a.f32", 0.5f);
  w.set_bool("a.bool", true);
  w.set_string("a.str", "h\xc3\xa9llo");
  w.set_string_array("a.strs", {"x", "", "yz"});
  w.set_f32_array("a.f32s", {1.5f, -2.0f});
  w.set_i32_array("a.i32s", {4, -5, 6});
  w.set_u32("a.u32", 8);  // replaces
  Tensor t = Tensor::zeros(DType::F32, {3, 4});
  for (int i = 0; i < 12; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  w.add_tensor("t", t);
  Tensor v = Tensor::zeros(DType::F16, {5});
  w.add_tensor("v", v);
  const std::string p = tmp_path("basic.gguf");
  w.write(p);
  auto g = GgufFile::open(p);
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 64u);
  EXPECT_EQ(g->get_u32("a.u32"), 8u);
  EXPECT_EQ(g->get_i32("a.i32"), -3);
  EXPECT_EQ(g->get_u64("a.u64"), 1ull << 40);
  EXPECT_FLOAT_EQ(g->get_f32("a.f32"), 0.5f);
  EXPECT_TRUE(g->get_bool("a.bool"));
  EXPECT_EQ(g->get_string("a.str"), "h\xc3\xa9llo");
  EXPECT_EQ(g->get_string_array("a.strs"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(g->get_f32_array("a.f32s"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(g->get_int_array("a.i32s"), (std::vector<int64_t>{4, -5, 6}));
  Tensor r = g->tensor("t");
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(std::memcmp(r.data(), t.data(), t.nbytes()), 0);
  EXPECT_EQ(g->find_tensor("t")->offset % 64, 0u);
  EXPECT_EQ(g->find_tensor("v")->offset % 64, 0u);
  EXPECT_EQ(g->tensor("v").dtype(), DType::F16);
  // Wrong-type access names the file and key.
  try {
    g->get_string("a.u32");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.u32"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos);
  }
  std::remove(p.c_str());
}

TEST(GgufWriter, Stories260KF32RoundTripsBitIdentically) {
  auto src = open_weights(kModel + "/stories260K.gguf");
  auto orig = GgufFile::open(kModel + "/stories260K.gguf");
  GgufModelOptions opt;
  opt.tokenizer_from = orig.get();
  const std::string p = tmp_path("f32.gguf");
  write_model_gguf(*src, p, opt);
  auto back = open_weights(p);
  ASSERT_EQ(back->names(), src->names());
  for (const auto& n : src->names()) {
    Tensor a = src->get(n), b = back->get(n);
    ASSERT_EQ(a.shape(), b.shape()) << n;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << n;
  }
  // Stored layout equals the original file (interleaved q/k rows), not just after reading.
  auto g = GgufFile::open(p);
  for (const auto& t : orig->tensors()) {
    Tensor a = orig->tensor(t.name), b = g->tensor(t.name);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << t.name;
  }
  const ModelSpec& s = back->spec();
  EXPECT_EQ(s.n_layers, 5);
  EXPECT_EQ(s.n_kv_heads, 4);
  auto tok = back->tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->tokens, src->tokenizer()->tokens);
  EXPECT_EQ(tok->scores, src->tokenizer()->scores);
  std::remove(p.c_str());
}

TEST(GgufWriter, Q4KMMixAndBytesMatchLlamaQuantize) {
  auto src = open_weights(kModel + "/stories260K.gguf");
  auto orig = GgufFile::open(kModel + "/stories260K.gguf");
  auto ref = GgufFile::open(kModel + "/quantized/stories260K-Q4_K_M.gguf");
  GgufModelOptions opt;
  opt.type = GgufFileType::Q4_K_M;
  opt.tokenizer_from = orig.get();
  const std::string p = tmp_path("q4km.gguf");
  write_model_gguf(*src, p, opt);
  auto g = GgufFile::open(p);
  EXPECT_EQ(g->get_u32("general.file_type"), 15u);
  size_t same_bytes = 0;
  for (const auto& t : ref->tensors()) {
    const GgufTensorInfo* mine = g->find_tensor(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_EQ(dtype_name(mine->dtype), std::string(dtype_name(t.dtype))) << t.name;
    if (mine->dtype == t.dtype && mine->nbytes == t.nbytes) {
      Tensor a = ref->tensor(t.name), b = g->tensor(t.name);
      if (std::memcmp(a.data(), b.data(), a.nbytes()) == 0) ++same_bytes;
      else ADD_FAILURE() << t.name << " bytes differ from llama-quantize's";
    }
  }
  EXPECT_EQ(same_bytes, ref->tensors().size());
  // And the mix is what the rule says for 5 layers: attn_v/ffn_down get more bits in layers
  // 0 (first eighth is empty: 5/8 = 0), 2 ((2-0)%3 == 2) and 4 (>= 7*5/8 = 4).
  ModelSpec s = src->spec();
  for (int64_t i = 0; i < 5; ++i) {
    DType v = gguf_tensor_type(GgufFileType::Q4_K_M, s, "blk." + std::to_string(i) + ".attn_v.weight", {256, 256});
    EXPECT_EQ(v, (i == 2 || i == 4) ? DType::Q6_K : DType::Q4_K) << i;
  }
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "output.weight", {512, 256}), DType::Q6_K);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "output.weight", {512, 64}), DType::Q8_0);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "blk.0.ffn_gate.weight", {172, 64}), DType::Q5_0);
  // A fused attn_qkv follows attn_v's rule (llama.cpp 3f545becc counts it as one): Q4_K in
  // layer 0 of 5, which falls back to Q5_0 for rows of 64.
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "blk.0.attn_qkv.weight", {192, 64}), DType::Q5_0);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "blk.0.ffn_down.weight", {64, 172}), DType::F16);
  EXPECT_EQ(gguf_tensor_type(GgufFileType::Q4_K_M, s, "blk.0.attn_norm.weight", {64}), DType::F32);
  std::remove(p.c_str());
}

// The Q3_K_M and Q2_K mixes, rule by rule as llama-quantize (llama.cpp 3f545becc, no imatrix)
// applies them to a Llama-3-8B-like spec (32 layers, 32 heads, 8 KV heads: GQA 4).
TEST(GgufWriter, Q3KMAndQ2KMixesFollowLlamaQuantizesRules) {
  ModelSpec s;
  s.family = "llama";
  s.n_layers = 32;
  s.n_heads = 32;
  s.n_kv_heads = 8;
  auto type = [&](GgufFileType ft, const std::string& name, std::vector<int64_t> shape = {4096, 4096}) {
    return gguf_tensor_type(ft, s, name, shape);
  };
  for (auto ft : {GgufFileType::Q3_K_M, GgufFileType::Q2_K}) {
    SCOPED_TRACE(gguf_file_type_name(ft));
    const DType base = ft == GgufFileType::Q3_K_M ? DType::Q3_K : DType::Q2_K;
    EXPECT_EQ(type(ft, "output.weight"), DType::Q6_K);
    EXPECT_EQ(type(ft, "token_embd.weight"), base);  // untied: the file's base type
    EXPECT_EQ(type(ft, "blk.7.attn_q.weight"), base);
    EXPECT_EQ(type(ft, "blk.7.attn_k.weight"), base);
    EXPECT_EQ(type(ft, "blk.7.ffn_gate.weight"), base);
    EXPECT_EQ(type(ft, "blk.7.ffn_up.weight"), base);
    EXPECT_EQ(type(ft, "blk.7.attn_norm.weight", {4096}), DType::F32);
    EXPECT_EQ(type(ft, "blk.7.ffn_gate_inp.weight", {8, 4096}), DType::F32);  // routers stay f32
    EXPECT_EQ(type(ft, "blk.7.attn_q.weight", {64, 64}), DType::Q4_0);     // Q2_K/Q3_K's fallback
  }
  // Q3_K_M: attn_v Q5_K in the first two layers, then Q4_K; ffn_down Q5_K in the first sixteenth
  // (32 / 16 = 2 layers), then Q4_K; attn_output Q4_K.
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.0.attn_v.weight", {4096, 1024}), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.1.attn_v.weight", {4096, 1024}), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.2.attn_v.weight", {4096, 1024}), DType::Q4_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.1.ffn_down.weight"), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.2.ffn_down.weight"), DType::Q4_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.31.ffn_down.weight"), DType::Q4_K);
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.9.attn_output.weight"), DType::Q4_K);
  // Q2_K: attn_v Q4_K with GQA >= 4 (Q3_K without), attn_output and ffn_down Q3_K.
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.3.attn_v.weight", {4096, 1024}), DType::Q4_K);
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.3.attn_output.weight"), DType::Q3_K);
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.3.ffn_down.weight"), DType::Q3_K);
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.3.ffn_down_exps.weight"), DType::Q3_K);  // by substring
  s.n_kv_heads = 16;  // GQA 2
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.3.attn_v.weight", {4096, 2048}), DType::Q3_K);
  // A 70B (llama, 80 layers, GQA): attn_v's Q3_K / Q4_K become Q5_K.
  s.n_layers = 80;
  s.n_kv_heads = 8;
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.40.attn_v.weight", {8192, 1024}), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q2_K, "blk.40.attn_v.weight", {8192, 1024}), DType::Q5_K);
  // 8 experts (Mixtral): attn_k and attn_v Q8_0 whatever the mix, attn_output Q5_K.
  s.n_layers = 32;
  s.n_experts = 8;
  for (auto ft : {GgufFileType::Q4_0, GgufFileType::Q4_K_M, GgufFileType::Q3_K_M, GgufFileType::Q2_K}) {
    SCOPED_TRACE(gguf_file_type_name(ft));
    EXPECT_EQ(type(ft, "blk.5.attn_v.weight", {4096, 1024}), DType::Q8_0);
    EXPECT_EQ(type(ft, "blk.5.attn_k.weight", {4096, 1024}), DType::Q8_0);
  }
  EXPECT_EQ(type(GgufFileType::Q3_K_M, "blk.5.attn_output.weight"), DType::Q5_K);
  EXPECT_EQ(type(GgufFileType::Q4_0, "blk.5.attn_output.weight"), DType::Q4_0);
}

TEST(GgufWriter, Iq4MixesFollowLlamaQuantizesRules) {
  // llama.cpp 3f545becc, LLAMA_FTYPE_MOSTLY_IQ4_NL / IQ4_XS without an importance matrix: attn_v
  // Q5_K with GQA >= 4, ffn_down Q5_K in the first eighth of the layers, the classifier Q6_K,
  // the rest the base type; IQ4_XS rows that do not fit 256 fall back to IQ4_NL.
  ModelSpec s;
  s.family = "llama";
  s.n_layers = 16;
  s.n_heads = 32;
  s.n_kv_heads = 8;
  for (auto ft : {GgufFileType::IQ4_NL, GgufFileType::IQ4_XS}) {
    SCOPED_TRACE(gguf_file_type_name(ft));
    const DType base = ft == GgufFileType::IQ4_NL ? DType::IQ4_NL : DType::IQ4_XS;
    auto type = [&](const std::string& name, std::vector<int64_t> shape = {2048, 2048}) {
      return gguf_tensor_type(ft, s, name, shape);
    };
    EXPECT_EQ(gguf_file_type_from_name(dtype_name(base)), ft);
    EXPECT_EQ(type("output.weight"), DType::Q6_K);
    EXPECT_EQ(type("token_embd.weight"), base);
    EXPECT_EQ(type("blk.3.attn_v.weight", {512, 2048}), DType::Q5_K);  // GQA 4
    EXPECT_EQ(type("blk.1.ffn_down.weight"), DType::Q5_K);             // 1 < 16 / 8
    EXPECT_EQ(type("blk.2.ffn_down.weight"), base);
    for (const char* m : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      EXPECT_EQ(type(std::string("blk.0.") + m + ".weight"), base) << m;
    EXPECT_EQ(type("blk.3.ffn_up.weight", {1536, 576}), DType::IQ4_NL);  // 576 = 18 x 32
  }
  s.n_kv_heads = 16;  // GQA 2: attn_v keeps the base type
  EXPECT_EQ(gguf_tensor_type(GgufFileType::IQ4_XS, s, "blk.3.attn_v.weight", {1024, 2048}), DType::IQ4_XS);
}

TEST(GgufWriter, TernaryMixesFollowLlamaQuantizesRules) {
  // llama.cpp 3f545becc, LLAMA_FTYPE_MOSTLY_TQ1_0 / TQ2_0: every matrix ternary, an untied
  // token_embd Q4_K, the classifier Q6_K (Q8_0 when its rows do not fit 256), rows that do not
  // fit 256 Q4_0, and no per-layer rule (attn_v, ffn_down, attn_output keep the base type).
  ModelSpec s;
  s.family = "llama";
  s.n_layers = 16;
  s.n_heads = 32;
  s.n_kv_heads = 8;
  for (auto ft : {GgufFileType::TQ1_0, GgufFileType::TQ2_0}) {
    SCOPED_TRACE(gguf_file_type_name(ft));
    const DType base = ft == GgufFileType::TQ1_0 ? DType::TQ1_0 : DType::TQ2_0;
    auto type = [&](const std::string& name, std::vector<int64_t> shape = {2048, 2048}) {
      return gguf_tensor_type(ft, s, name, shape);
    };
    EXPECT_EQ(gguf_file_type_from_name(dtype_name(base)), ft);
    s.tie_word_embeddings = false;
    EXPECT_EQ(type("output.weight"), DType::Q6_K);
    EXPECT_EQ(type("output.weight", {32000, 576}), DType::Q8_0);
    EXPECT_EQ(type("token_embd.weight"), DType::Q4_K);
    EXPECT_EQ(type("token_embd.weight", {32000, 576}), DType::Q5_0);  // Q4_K's fallback
    s.tie_word_embeddings = true;
    EXPECT_EQ(type("token_embd.weight"), DType::Q6_K);  // tied: the classifier's rule
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      EXPECT_EQ(type(std::string("blk.0.") + m + ".weight"), base) << m;
      EXPECT_EQ(type(std::string("blk.15.") + m + ".weight"), base) << m;
    }
    EXPECT_EQ(type("blk.3.ffn_down.weight", {576, 1536}), base);  // rows of 1536 = 6 x 256 fit
    EXPECT_EQ(type("blk.3.ffn_up.weight", {1536, 576}), DType::Q4_0);
    EXPECT_EQ(type("blk.3.attn_norm.weight", {2048}), DType::F32);
  }
}

TEST(GgufWriter, QuantizedTypesDequantizeCloseToTheOriginals) {
  auto src = open_weights(kModel + "/hf");
  for (GgufFileType ft : {GgufFileType::F16, GgufFileType::BF16, GgufFileType::Q8_0, GgufFileType::Q4_0}) {
    GgufModelOptions opt;
    opt.type = ft;
    const std::string p = tmp_path(std::string(gguf_file_type_name(ft)) + ".gguf");
    write_model_gguf(*src, p, opt);
    auto back = open_weights(p);
    for (const char* n : {"blk.1.attn_q.weight", "blk.3.ffn_up.weight", "token_embd.weight"}) {
      Tensor a = src->get(n), b = back->get(n);
      ASSERT_EQ(a.shape(), b.shape());
      std::vector<float> row(b.row_size());
      double err = 0, ref = 0;
      for (int64_t r = 0; r < b.rows(); ++r) {
        dequantize_row(b.dtype(), b.row_ptr(r), row.data(), b.row_size());
        const float* x = reinterpret_cast<const float*>(a.row_ptr(r));
        for (int64_t c = 0; c < b.row_size(); ++c) { err += (row[c] - x[c]) * (row[c] - x[c]); ref += x[c] * x[c]; }
      }
      const double nmse = err / ref;
      const double bound = ft == GgufFileType::F16 ? 1e-6 : ft == GgufFileType::BF16 ? 1e-4 : ft == GgufFileType::Q8_0 ? 1e-3 : 2e-2;
      EXPECT_LT(nmse, bound) << gguf_file_type_name(ft) << " " << n;
      EXPECT_GT(nmse, 0.0) << gguf_file_type_name(ft) << " " << n << ": nothing was quantized";
    }
    // Placeholder tokenizer makes the file complete.
    auto tok = back->tokenizer();
    ASSERT_TRUE(tok);
    EXPECT_EQ(tok->tokens.size(), 512u);
    std::remove(p.c_str());
  }
}

}  // namespace
}  // namespace ptn
