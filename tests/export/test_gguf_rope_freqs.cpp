// Llama 3.1's RoPE scaling as llama.cpp's converter stores it in a GGUF: no rope.scaling keys,
// a rope_freqs.weight tensor of per-pair factors instead. A tiny random Llama with the Llama 3.1
// parameters (factor 8, low 1, high 4, original context 8192) goes through ptn's GGUF writer;
// the tensor must hold the factors the published formula gives (computed here, not by ptn),
// the GGUF import must read it back as llama3 scaling, and the imported program must give the
// logits of the HF directory with rope_scaling llama3. The same weights without the scaling
// give other logits at these positions, so a reader that dropped rope_freqs would fail.
#include <gtest/gtest.h>

#include <cmath>

#include "export_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/synth.h"

namespace ptn::testing {
namespace {

using json = nlohmann::json;
using Rows = std::vector<std::vector<float>>;

constexpr double kTheta = 500000.0;
constexpr int64_t kHeadDim = 32;  // 16 pairs: with this theta most of them are past the 2048-token wavelength

json llama31_config() {
  json c = tiny_llama_config(/*hidden=*/64, /*heads=*/2, /*kv_heads=*/1, kHeadDim, /*vocab=*/288, /*layers=*/2);
  c["rope_theta"] = kTheta;
  c["max_position_embeddings"] = 131072;
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  return c;
}

// llama3 scaling as a factor per rotated pair: 1 where the wavelength is below
// original / high_freq_factor, `factor` above original / low_freq_factor, a blend between.
std::vector<double> llama3_pair_factors(double theta, int64_t dim, double factor, double low, double high, double original) {
  const double pi = std::acos(-1.0);
  std::vector<double> out;
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double wavelen = 2 * pi * std::pow(theta, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
    if (wavelen < original / high) out.push_back(1.0);
    else if (wavelen > original / low) out.push_back(factor);
    else {
      const double smooth = (original / wavelen - low) / (high - low);
      out.push_back(1.0 / ((1 - smooth) / factor + smooth));
    }
  }
  return out;
}

std::string write_gguf(const std::string& hf_dir, const std::string& path) {
  auto src = open_weights(hf_dir);
  const TokenizerSpec tok = placeholder_tokenizer(src->spec().vocab_size);
  GgufModelOptions go;
  go.tokenizer = &tok;
  write_model_gguf(*src, path, go);
  return path;
}

std::shared_ptr<const Program> program_of(const std::string& model) {
  ExportOptions o = base_options(model, "");
  o.samples = 0;
  o.max_seq_length = 160;
  o.progress = false;
  std::ostringstream log;
  return export_in_memory(o, log);
}

Rows logits(const std::shared_ptr<const Program>& p) {
  // 128 positions: far enough for the low frequencies' factors to move the angles
  const std::vector<int32_t> all = some_tokens(136, 288, 31);
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 128), decode(all.begin() + 128, all.end());
  return run_sequence(p, ExecMode::Optimized, "paged", DType::F32, prompt, decode);
}

TEST(GgufRopeFreqs, Llama31ScalingReadFromTheTensorGivesTheHfLogits) {
  TempDir d;
  const json cfg = llama31_config();
  const std::string hf = d / "hf";
  write_hf_directory(*random_weights(model_spec_from_hf_config(cfg, "llama31"), 7), cfg, hf, DType::F32);
  const std::string gguf = write_gguf(hf, d / "llama31.gguf");

  // The file carries the scaling only as rope_freqs.weight, with the formula's values.
  auto g = GgufFile::open(gguf);
  for (const auto& [k, v] : g->metadata()) EXPECT_EQ(k.find("rope.scaling"), std::string::npos) << k;
  ASSERT_TRUE(g->find_tensor("rope_freqs.weight"));
  Tensor t = g->tensor("rope_freqs.weight");
  ASSERT_EQ(t.dtype(), DType::F32);
  ASSERT_EQ(t.ndim(), 1);
  const std::vector<double> want = llama3_pair_factors(kTheta, kHeadDim, 8, 1, 4, 8192);
  ASSERT_EQ(t.dim(0), static_cast<int64_t>(want.size()));
  int scaled = 0, blended = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.data_as<float>()[i], want[i], 1e-5 * want[i]) << "pair " << i;
    scaled += want[i] == 8.0;
    blended += want[i] > 1.0 && want[i] < 8.0;
  }
  EXPECT_GE(scaled, 4);  // the case has pairs in every region
  EXPECT_GE(blended, 1);

  auto from_hf = program_of(hf);
  auto from_gguf = program_of(gguf);
  const RopeScaling& rs = from_gguf->meta().spec.rope_scaling;
  EXPECT_EQ(rs.type, RopeScalingType::Llama3);
  EXPECT_FLOAT_EQ(rs.factor, 8.0f);
  EXPECT_FLOAT_EQ(rs.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(rs.high_freq_factor, 4.0f);
  EXPECT_EQ(rs.original_max_position, 8192);
  bool noted = false;
  for (const std::string& n : from_gguf->meta().spec.source_notes) noted |= n.find("rope_freqs.weight matched llama3") != std::string::npos;
  EXPECT_TRUE(noted) << "the import does not say where the scaling came from";

  const Rows want_logits = logits(from_hf);
  const double e = nmse(logits(from_gguf), want_logits);
  std::printf("[ rope     ] GGUF with rope_freqs.weight against HF rope_scaling llama3: NMSE %.1e\n", e);
  EXPECT_LT(e, 1e-10);

  // Without the scaling these positions give other logits: the comparison above can fail.
  json plain = cfg;
  plain.erase("rope_scaling");
  const std::string hf_plain = d / "hf_plain";
  write_hf_directory(*open_weights(hf), plain, hf_plain, DType::F32);
  const std::string gguf_plain = write_gguf(hf_plain, d / "plain.gguf");
  EXPECT_FALSE(GgufFile::open(gguf_plain)->find_tensor("rope_freqs.weight"));
  const double unscaled = nmse(logits(program_of(gguf_plain)), want_logits);
  std::printf("[ rope     ] the same weights without the scaling: NMSE %.1e\n", unscaled);
  EXPECT_GT(unscaled, 1e-9);
}

}  // namespace
}  // namespace ptn::testing
