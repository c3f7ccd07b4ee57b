// WeightSource: stories260K from its GGUF and from its HF directory gives the same tensors
// (the GGUF's interleaved q/k rows permuted back), and the spec matches the known model.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/quant.h"
#include "formats/gguf.h"
#include "formats/sha256.h"
#include "formats/weights.h"

namespace ptn {
namespace {

const std::string kModel = std::string(PTN_SOURCE_DIR) + "/models/stories260K";

TEST(Weights, Stories260KSpecFromGguf) {
  auto w = open_weights(kModel + "/stories260K.gguf");
  const ModelSpec& s = w->spec();
  EXPECT_EQ(s.family, "llama");
  EXPECT_EQ(s.vocab_size, 512);
  EXPECT_EQ(s.hidden_size, 64);
  EXPECT_EQ(s.intermediate_size, 172);
  EXPECT_EQ(s.n_layers, 5);
  EXPECT_EQ(s.n_heads, 8);
  EXPECT_EQ(s.n_kv_heads, 4);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_EQ(s.rope_dim, 8);
  EXPECT_FLOAT_EQ(s.rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
  EXPECT_EQ(s.max_position_embeddings, 2048);  // what the file says (trained at 512)
  EXPECT_FALSE(s.tie_word_embeddings);          // the GGUF carries an explicit output.weight
  ASSERT_EQ(s.layers.size(), 5u);
  for (const auto& l : s.layers) EXPECT_EQ(l.kind, AttnKind::Full);
  EXPECT_EQ(w->names().size(), 48u);
  auto tok = w->tokenizer();
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ(tok->kind, TokenizerKind::SentencePiece);
  EXPECT_EQ(tok->tokens.size(), 512u);
  EXPECT_EQ(tok->scores.size(), 512u);
  EXPECT_EQ(tok->bos_id, 1);
  EXPECT_EQ(tok->eos_id, 2);
  EXPECT_EQ(tok->unk_id, 0);
  EXPECT_FALSE(tok->pad_id.has_value());  // stored as 0xFFFFFFFF
  EXPECT_EQ(tok->token_types[3], TokenType::Byte);
  EXPECT_EQ(tok->tokens[3], "<0x00>");
}

TEST(Weights, Stories260KGgufAndHfAreBitIdentical) {
  auto g = open_weights(kModel + "/stories260K.gguf");
  auto h = open_weights(kModel + "/hf");
  EXPECT_TRUE(h->spec().tie_word_embeddings);
  EXPECT_FALSE(h->tokenizer().has_value());
  size_t compared = 0;
  for (const std::string& name : h->names()) {
    ASSERT_TRUE(g->has(name)) << name;
    Tensor a = g->get(name), b = h->get(name);
    ASSERT_EQ(a.dtype(), DType::F32) << name;
    ASSERT_EQ(b.dtype(), DType::F32) << name;
    ASSERT_EQ(a.shape(), b.shape()) << name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << name << " differs";
    ++compared;
  }
  EXPECT_EQ(compared, 47u);  // all but output.weight (tied in the HF directory)
  // The GGUF's explicit output.weight is a copy of the embedding.
  Tensor out = g->get("output.weight"), emb = h->get("token_embd.weight");
  EXPECT_EQ(std::memcmp(out.data(), emb.data(), emb.nbytes()), 0);
}

TEST(Weights, QkPermutationChangesRowsAsDocumented) {
  // Raw GGUF row 2i+j of head h must land on row j*D/2+i: check head 1, i=2, j=1 of attn_q (D=8).
  auto file = GgufFile::open(kModel + "/stories260K.gguf");
  Tensor raw = file->tensor("blk.0.attn_q.weight");
  auto w = open_weights(kModel + "/stories260K.gguf");
  Tensor q = w->get("blk.0.attn_q.weight");
  const int64_t D = 8, h = 1, i = 2, j = 1;
  EXPECT_EQ(std::memcmp(q.row_ptr(h * D + j * D / 2 + i), raw.row_ptr(h * D + 2 * i + j), q.row_bytes()), 0);
  EXPECT_NE(std::memcmp(q.row_ptr(h * D + 1), raw.row_ptr(h * D + 1), q.row_bytes()), 0);
  // interleave_heads is the inverse.
  Tensor back = interleave_heads(q, 8, "test");
  EXPECT_EQ(std::memcmp(back.data(), raw.data(), raw.nbytes()), 0);
}

TEST(Weights, SourceFilesCarrySha256) {
  auto g = open_weights(kModel + "/stories260K.gguf");
  auto files = g->source_files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].size, 1185376u);
  // PROVENANCE.md records this hash.
  EXPECT_EQ(files[0].sha256, "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
}

TEST(Weights, QuantizedStoriesGgufsDequantizeCloseToF32) {
  auto f32 = open_weights(kModel + "/hf");
  for (const char* name : {"F16", "Q6_K", "Q4_K_M"}) {
    auto q = open_weights(kModel + "/quantized/stories260K-" + std::string(name) + ".gguf");
    EXPECT_EQ(q->names().size(), 48u) << name;
    for (const char* t : {"blk.0.attn_q.weight", "blk.4.attn_k.weight", "blk.2.ffn_down.weight", "token_embd.weight"}) {
      Tensor a = f32->get(t), b = q->get(t);
      ASSERT_EQ(a.shape(), b.shape()) << name << " " << t;
      std::vector<float> row(b.row_size());
      double err = 0, ref = 0;
      for (int64_t r = 0; r < b.rows(); ++r) {
        dequantize_row(b.dtype(), b.row_ptr(r), row.data(), b.row_size());
        const float* x = reinterpret_cast<const float*>(a.row_ptr(r));
        for (int64_t c = 0; c < b.row_size(); ++c) { err += (row[c] - x[c]) * (row[c] - x[c]); ref += x[c] * x[c]; }
      }
      // Rows in the wrong order (a missed permutation) would give an NMSE near 2.
      EXPECT_LT(err / ref, 0.02) << name << " " << t << " (" << dtype_name(b.dtype()) << ")";
    }
  }
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(m.data(), m.size()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  Sha256 s;  // fed in uneven pieces
  for (size_t k = 0; k < million.size(); k += 777) s.update(million.data() + k, std::min<size_t>(777, million.size() - k));
  EXPECT_EQ(s.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Weights, UnknownPathIsAnError) {
  try {
    open_weights(kModel + "/PROVENANCE.md");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PROVENANCE.md"), std::string::npos);
  }
}

}  // namespace
}  // namespace ptn
