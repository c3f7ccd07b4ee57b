// `ptn export --f16-as-bf16`: exactly the matrices that would be F16 become BF16 (quantized and
// f32 tensors keep their type and bytes), the golden samples come from the source weights so
// the conversion's cost shows in verify, and contradictory flag combinations are refused.
// `--golden-from-source` does the same for any --quantize.
#include <gtest/gtest.h>

#include <cstring>

#include "core/fp16.h"
#include "export_test_util.h"

namespace ptn {
namespace {

using namespace ptn::testing;

// bf16 of a float by round to nearest even, written out here independently of the library.
uint16_t bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

std::string q4km_gguf() { return stories_dir() + "/quantized/stories260K-Q4_K_M.gguf"; }

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// llama.cpp's Q4_K_M stories260K keeps some matrices F16 next to Q5_0 / Q8_0 ones and f32 norms:
// only the F16 ones may change, each element rounded from its F16 value.
TEST(F16AsBf16, ConvertsExactlyTheF16Matrices) {
  TempDir d;
  ExportOptions plain = base_options(q4km_gguf(), d / "plain.ptn");
  quiet_export(plain);
  ExportOptions conv = plain;
  conv.output = d / "bf16.ptn";
  conv.f16_as_bf16 = true;
  quiet_export(conv);
  auto a = Program::load(plain.output, VerifyLevel::Full);
  auto b = Program::load(conv.output, VerifyLevel::Full);

  int f16 = 0, quantized = 0, kept = 0;
  for (const auto& [name, ta] : a->tensors()) {
    if (name.rfind("golden.", 0) == 0 || name.rfind("tokenizer.", 0) == 0) continue;
    SCOPED_TRACE(name);
    const Tensor& tb = b->tensor(name);
    ASSERT_EQ(ta.shape(), tb.shape());
    if (ta.dtype() != DType::F16) {
      EXPECT_TRUE(same_bytes(ta, tb)) << dtype_name(ta.dtype()) << " -> " << dtype_name(tb.dtype());
      quantized += traits(ta.dtype()).quantized;
      ++kept;
      continue;
    }
    ++f16;
    ASSERT_EQ(ta.ndim(), 2);
    ASSERT_EQ(tb.dtype(), DType::BF16);
    const auto* h = static_cast<const uint16_t*>(ta.data());
    const auto* g = static_cast<const uint16_t*>(tb.data());
    int64_t wrong = 0;
    for (int64_t i = 0; i < ta.numel(); ++i) wrong += g[i] != bf16_rne(fp16_to_f32(h[i]));
    EXPECT_EQ(wrong, 0);
  }
  // The fixture holds all three kinds, or the test proves nothing.
  EXPECT_GT(f16, 0);
  EXPECT_GT(quantized, 0);
  EXPECT_GT(kept, quantized);  // f32 norms too

  const auto& pv = b->meta().provenance;
  EXPECT_EQ(pv.value("weight_conversion", ""), kF16AsBf16Conversion);
  EXPECT_EQ(pv.value("golden_weights", ""), kGoldenFromSource);
  EXPECT_EQ(pv.value("converted_tensors", -1), f16);
  EXPECT_FALSE(a->meta().provenance.contains("weight_conversion"));

  // The golden samples were computed on the source weights: the plain export ran the same
  // reference on the same (unconverted) tensors with the same prompts.
  ASSERT_EQ(a->meta().samples.size(), b->meta().samples.size());
  for (size_t s = 0; s < a->meta().samples.size(); ++s) {
    EXPECT_EQ(a->meta().samples[s].prompt, b->meta().samples[s].prompt);
    EXPECT_EQ(a->meta().samples[s].decode, b->meta().samples[s].decode);
    EXPECT_TRUE(same_bytes(a->tensor(a->meta().samples[s].logits_tensor), b->tensor(b->meta().samples[s].logits_tensor)))
        << "sample " << s;
  }
}

// stories260K from its f32 HF weights as --quantize f16 --f16-as-bf16: verify reports the cost
// (nonzero, below the default threshold) where a plain --quantize bf16 export, whose goldens
// ran on the BF16 weights, shows only the runtime's own error.
TEST(F16AsBf16, VerifyShowsTheCostAndPasses) {
  TempDir d;
  ExportOptions conv = base_options(stories_dir() + "/hf", d / "conv.ptn");
  conv.max_seq_length = 64;
  conv.quantize = "f16";
  conv.f16_as_bf16 = true;
  quiet_export(conv);
  ExportOptions plain = conv;
  plain.output = d / "plain.ptn";
  plain.quantize = "bf16";
  plain.f16_as_bf16 = false;
  quiet_export(plain);
  auto pc = Program::load(conv.output, VerifyLevel::Full);
  auto pp = Program::load(plain.output, VerifyLevel::Full);
  // Same weights in both files.
  for (const auto& [name, t] : pp->tensors())
    if (name.rfind("golden.", 0) != 0 && name.rfind("tokenizer.", 0) != 0) {
      EXPECT_TRUE(same_bytes(t, pc->tensor(name))) << name;
      if (t.ndim() == 2) {
        EXPECT_EQ(t.dtype(), DType::BF16) << name;
      }
    }

  for (ExecMode mode : {ExecMode::Reference, ExecMode::Optimized}) {
    VerifyOptions vo;
    vo.mode = mode;
    vo.cache_kind = "reference";
    vo.max_nmse = kF16AsBf16VerifyMaxNmse;
    const auto rc = verify_samples(pc, vo);
    const auto rp = verify_samples(pp, vo);
    ASSERT_EQ(rc.size(), 2u);
    ASSERT_EQ(rp.size(), 2u);
    for (size_t s = 0; s < rc.size(); ++s) {
      SCOPED_TRACE(std::string(mode == ExecMode::Reference ? "reference" : "optimized") + " sample " +
                   std::to_string(s));
      EXPECT_TRUE(rc[s].pass) << rc[s].cmp.nmse;
      EXPECT_GT(rc[s].cmp.nmse, 1e-7);  // bf16 rounding of f32 weights: ~5e-6 measured
      EXPECT_LT(rc[s].cmp.nmse, kF16AsBf16VerifyMaxNmse);
      // The reference on its own weights reproduces itself; the optimized bf16 kernels round
      // the activations too (~1e-6), still well under the conversion's cost.
      if (mode == ExecMode::Reference) {
        EXPECT_EQ(rp[s].cmp.nmse, 0.0);
      }
      EXPECT_LT(rp[s].cmp.nmse * 2, rc[s].cmp.nmse);
    }
  }
}

// Without golden samples the conversion is still recorded, but no goldens claim to be from the source.
TEST(F16AsBf16, WithoutSamplesTheProvenanceStillRecordsTheConversion) {
  TempDir d;
  ExportOptions o = base_options(q4km_gguf(), d / "n.ptn");
  o.samples = 0;
  o.f16_as_bf16 = true;
  quiet_export(o);
  auto p = Program::load(o.output, VerifyLevel::Full);
  int bf16 = 0;
  for (const auto& [name, t] : p->tensors()) bf16 += t.dtype() == DType::BF16;
  EXPECT_GT(bf16, 0);
  const auto& pv = p->meta().provenance;
  EXPECT_EQ(pv.value("weight_conversion", ""), kF16AsBf16Conversion);
  ASSERT_TRUE(pv.contains("converted_tensors"));
  EXPECT_TRUE(pv["converted_tensors"].is_number_unsigned());  // inspect and verify read it so
  EXPECT_EQ(pv["converted_tensors"].get<int>(), bf16);
  EXPECT_FALSE(pv.contains("golden_weights"));
  EXPECT_TRUE(p->meta().samples.empty());
}

TEST(F16AsBf16, ContradictoryFlagsAreRejected) {
  ExportOptions o = base_options(q4km_gguf(), "/nonexistent/never-written.ptn");
  o.f16_as_bf16 = true;
  for (const std::string q : {"bf16", "f32"}) {
    o.quantize = q;
    try {
      validate_export_options(o);
      ADD_FAILURE() << "--quantize " << q << " --f16-as-bf16 accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--f16-as-bf16"), std::string::npos) << m;
      EXPECT_NE(m.find("--quantize " + q), std::string::npos) << m;
    }
  }
  for (const std::string q : {"", "f16", "q8_0", "q4_0", "q4_k_m"}) {
    o.quantize = q;
    EXPECT_NO_THROW(validate_export_options(o)) << q;
  }
}

// A source with no F16 matrix (f32 HF weights without --quantize f16) has nothing to convert:
// the export fails and names the flag instead of writing a program that claims a conversion.
// (With --quantize q8_0 stories260K's ffn_down rows of 172 fall back to F16, which converts.)
TEST(F16AsBf16, NothingToConvertIsAnError) {
  TempDir d;
  for (const std::string q : {""}) {
    ExportOptions o = base_options(stories_dir() + "/hf", d / "x.ptn");
    o.quantize = q;
    o.f16_as_bf16 = true;
    try {
      quiet_export(o);
      ADD_FAILURE() << "exported with nothing to convert, --quantize '" << q << "'";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--f16-as-bf16"), std::string::npos) << m;
      EXPECT_NE(m.find("nothing to convert"), std::string::npos) << m;
    }
    EXPECT_FALSE(fs::exists(d / "x.ptn"));
  }
}

// --golden-from-source with --quantize q8_0: the goldens are the f32 source's (bitwise those of
// the unconverted export), so the reference executor on the q8_0 weights now differs from them
// by the quantization, where without the flag it reproduces its goldens exactly.
TEST(GoldenFromSource, MeasuresTheQuantization) {
  TempDir d;
  ExportOptions f32 = base_options(stories_dir() + "/hf", d / "f32.ptn");
  f32.max_seq_length = 64;
  quiet_export(f32);
  ExportOptions q = f32;
  q.output = d / "q.ptn";
  q.quantize = "q8_0";
  quiet_export(q);
  ExportOptions g = q;
  g.output = d / "g.ptn";
  g.golden_from_source = true;
  quiet_export(g);
  auto pf = Program::load(f32.output, VerifyLevel::Full);
  auto pq = Program::load(q.output, VerifyLevel::Full);
  auto pg = Program::load(g.output, VerifyLevel::Full);
  for (size_t s = 0; s < pf->meta().samples.size(); ++s)
    EXPECT_TRUE(same_bytes(pf->tensor(pf->meta().samples[s].logits_tensor), pg->tensor(pg->meta().samples[s].logits_tensor)))
        << "sample " << s;
  EXPECT_EQ(pg->meta().provenance.value("weight_conversion", ""), "quantize q8_0");
  EXPECT_EQ(pg->meta().provenance.value("golden_weights", ""), kGoldenFromSource);
  EXPECT_FALSE(pq->meta().provenance.contains("golden_weights"));

  VerifyOptions vo;
  vo.mode = ExecMode::Reference;
  vo.cache_kind = "reference";
  vo.max_nmse = 1e-2;
  const auto rg = verify_samples(pg, vo), rq = verify_samples(pq, vo);
  ASSERT_EQ(rg.size(), 2u);
  ASSERT_EQ(rq.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(rq[s].cmp.nmse, 0.0) << s;
    EXPECT_GT(rg[s].cmp.nmse, 1e-6) << s;  // q8_0 rounding: ~7e-5 measured
    EXPECT_TRUE(rg[s].pass) << rg[s].cmp.nmse;
  }
}

TEST(GoldenFromSource, RefusedWhenThereIsNothingToMeasure) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "x.ptn");
  o.golden_from_source = true;
  try {  // f32 weights kept as they are
    quiet_export(o);
    ADD_FAILURE() << "exported with no lossy conversion";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--golden-from-source"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(d / "x.ptn"));
  o.quantize = "q8_0";
  o.samples = 0;
  EXPECT_THROW(validate_export_options(o), Error);
}

// Only matrices convert: export_weight_type keeps 1-D tensors f32 and non-F16 matrices as they are.
TEST(F16AsBf16, WeightTypeRule) {
  ModelSpec spec;
  spec.n_layers = 8;
  const std::vector<int64_t> m = {64, 256}, v = {256};
  EXPECT_EQ(export_weight_type("", true, "blk.0.attn_q.weight", DType::F16, m, spec), DType::BF16);
  EXPECT_EQ(export_weight_type("", false, "blk.0.attn_q.weight", DType::F16, m, spec), DType::F16);
  EXPECT_EQ(export_weight_type("", true, "blk.0.attn_q.weight", DType::F32, m, spec), DType::F32);
  EXPECT_EQ(export_weight_type("", true, "blk.0.attn_q.weight", DType::Q8_0, m, spec), DType::Q8_0);
  EXPECT_EQ(export_weight_type("", true, "blk.0.attn_norm.weight", DType::F16, v, spec), DType::F32);
  EXPECT_EQ(export_weight_type("f16", true, "blk.0.attn_q.weight", DType::F32, m, spec), DType::BF16);
  EXPECT_EQ(export_weight_type("q4_k_m", true, "blk.0.attn_q.weight", DType::F32, m, spec), DType::Q4_K);
  // Rows of 40 fit no block: the q8_0 policy falls back to F16, which the flag makes BF16.
  EXPECT_EQ(export_weight_type("q8_0", true, "blk.0.attn_q.weight", DType::F32, {64, 40}, spec), DType::BF16);
}

}  // namespace
}  // namespace ptn
