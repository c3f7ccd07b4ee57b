// llama.cpp's own quantized stories260K files (models/stories260K/quantized/, made by its
// llama-quantize; llama.cpp-reference.json holds what llama.cpp computes with each): every file
// exports keeping its tensor types (Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q8_0, F16, BF16 and F32), its
// greedy continuation of "Once upon a time" is llama.cpp's text word for word, and its
// perplexity on ppl-text.txt with chunks of 128 tokens is within 1% of llama.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "core/cpu.h"
#include "export_test_util.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace ptn {
namespace {

using namespace ptn::testing;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("missing " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Perplexity as `ptn perplexity -c 128` and llama-perplexity compute it: BOS, the text without
// special tokens, chunks of n_ctx scored on their second half.
// The SIMD levels of this machine (forced with set_simd_cap, as PTN_SIMD does).
std::vector<SimdLevel> simd_levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX2VNNI, SimdLevel::AVX512})
    if (static_cast<int>(l) <= static_cast<int>(detected_simd_level())) out.push_back(l);
  return out;
}
struct SimdCapReset {
  ~SimdCapReset() { set_simd_cap(SimdLevel::AVX512); }
};

PerplexityResult perplexity(const std::shared_ptr<const Program>& p, const Tokenizer& tok, const std::string& text,
                            ExecMode mode) {
  SessionOptions so;
  so.mode = mode;
  Session session(p, so);
  std::vector<int32_t> tokens = {*tok.bos()};
  const auto body = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
  tokens.insert(tokens.end(), body.begin(), body.end());
  PerplexityOptions po;
  po.n_ctx = 128;
  po.bos = tok.bos();
  return session_perplexity(session, tokens, po);
}

TEST(LlamaCppMixes, GreedyTextEqualsLlamaCppAndPerplexityIsWithinOnePercent) {
  TempDir d;
  const nlohmann::json ref = nlohmann::json::parse(read_all(stories_dir() + "/llama.cpp-reference.json"));
  const std::string ppl_text = read_all(stories_dir() + "/ppl-text.txt");
  const auto& files = ref.at("files");
  ASSERT_EQ(files.size(), 10u);  // stories260K.gguf and the nine files of quantized/
  std::map<DType, int> seen;    // tensor types over all files
  for (const auto& [file, want] : files.items()) {
    SCOPED_TRACE(file);
    ExportOptions o = base_options(stories_dir() + "/" + file, d / "m.ptn");
    o.max_seq_length = 128;
    o.samples = 1;
    quiet_export(o);
    auto p = Program::load(o.output, VerifyLevel::Full);

    // The file's types are kept: every matrix the graph multiplies has its GGUF type.
    auto src = open_weights(o.model);
    for (const Node& n : p->graph().nodes)
      for (const auto& w : n.weights) {
        EXPECT_EQ(p->tensor(w).dtype(), src->get(w).dtype()) << w;
        ++seen[src->get(w).dtype()];
      }

    auto tok = Tokenizer::create(*p->meta().tokenizer);
    const std::vector<int32_t> prompt = tok->encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
    const std::string want_text = want.at("greedy_50_after_prompt").get<std::string>();
    // The optimized executor quantizes the activations of quantized weights to 8 bits per 32
    // or 256 as llama.cpp does (its Q8_0 / Q8_1 / Q8_K), at every SIMD level. (The reference
    // executor multiplies in f32 and double: its greedy text of Q3_K_M leaves llama.cpp's after
    // "She loved to play", at a near tie. Its perplexity is checked below.)
    SimdCapReset reset;
    for (SimdLevel level : simd_levels()) {
      set_simd_cap(level);
      const auto ids = greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 50);
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), ids.begin(), ids.end());
      const std::string full = tok->decode(all, /*skip_special=*/true);
      const std::string head = tok->decode(prompt, /*skip_special=*/true);
      ASSERT_EQ(full.compare(0, head.size(), head), 0) << full;
      EXPECT_EQ(full.substr(head.size()), want_text) << simd_level_name(level);
    }

    const double llama = want.at("ppl_c128").get<double>();
    const PerplexityResult opt = perplexity(p, *tok, ppl_text, ExecMode::Optimized);
    const PerplexityResult rf = perplexity(p, *tok, ppl_text, ExecMode::Reference);
    RecordProperty(file + " ppl", std::to_string(opt.ppl) + " (reference executor " + std::to_string(rf.ppl) +
                                      ", llama.cpp " + std::to_string(llama) + ")");
    EXPECT_EQ(opt.chunks, 4);  // 4 x 128 tokens of ppl-text.txt, the chunks llama-perplexity printed
    EXPECT_LT(std::fabs(opt.ppl / llama - 1), 0.01) << "ptn " << opt.ppl << ", llama.cpp " << llama;
    EXPECT_LT(std::fabs(rf.ppl / llama - 1), 0.01) << "ptn reference " << rf.ppl << ", llama.cpp " << llama;
  }
  // The files do exercise the types they were made for.
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::MXFP4, DType::Q8_0, DType::F16, DType::BF16,
                  DType::F32})
    EXPECT_GT(seen[t], 0) << dtype_name(t);
}

}  // namespace
}  // namespace ptn
