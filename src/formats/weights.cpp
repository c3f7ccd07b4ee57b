#include "formats/weights.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "core/blocks.h"
#include "core/error.h"
#include "core/file.h"
#include "formats/families.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "formats/sha256.h"

namespace ptn {

// ---- tensor source text ------------------------------------------------------------------

std::string format_tensor_source(const TensorSourceRef& r) {
  std::string s = r.name;
  if (r.row_begin >= 0)
    s += "[rows " + std::to_string(r.row_begin) + ":" + std::to_string(r.row_end) +
         (r.row_step != 1 || r.row_block != 1 ? ":" + std::to_string(r.row_step) : "") +
         (r.row_block != 1 ? ":" + std::to_string(r.row_block) : "") + "]";
  if (r.head_period > 0)
    s += "[head rows " + std::to_string(r.head_begin) + ":" + std::to_string(r.head_end) + " of " + std::to_string(r.head_period) + "]";
  if (r.expert >= 0) s += "[expert " + std::to_string(r.expert) + "]";
  if (!r.mxfp4_scales.empty()) s += " (mxfp4 scales: " + r.mxfp4_scales + ")";
  if (r.transposed) s += " (transposed)";
  if (r.transposed_blocks > 0) s += " (transposed in " + std::to_string(r.transposed_blocks) + " blocks)";
  if (r.interleaved_heads > 0) s += " (interleaved, " + std::to_string(r.interleaved_heads) + " heads)";
  return s;
}

TensorSourceRef parse_tensor_source(const std::string& text) {
  TensorSourceRef r;
  std::string s = text;
  auto bad = [&] { fail(ErrorKind::Internal, "tensor source '" + text + "'", "not in the form name[rows A:B] (interleaved, H heads)"); };
  // A trailing " (<head>N<tail>" with N > 0, cut off `s` into *out.
  auto count_suffix = [&](const std::string& head, const std::string& tail_text, int64_t* out) {
    const size_t p = s.find(head);
    if (p == std::string::npos) return;
    const std::string tail = s.substr(p + head.size());
    const size_t sp = tail.find(' ');
    if (sp == std::string::npos || tail.substr(sp) != tail_text) bad();
    try { *out = std::stoll(tail.substr(0, sp)); } catch (...) { bad(); }
    if (*out <= 0) bad();
    s = s.substr(0, p);
  };
  count_suffix(" (interleaved, ", " heads)", &r.interleaved_heads);
  count_suffix(" (transposed in ", " blocks)", &r.transposed_blocks);
  const std::string tr = " (transposed)";
  if (s.size() > tr.size() && s.compare(s.size() - tr.size(), tr.size(), tr) == 0) {
    r.transposed = true;
    s = s.substr(0, s.size() - tr.size());
  }
  const std::string mx = " (mxfp4 scales: ";
  if (auto p = s.find(mx); p != std::string::npos) {
    if (s.back() != ')' || s.size() <= p + mx.size() + 1) bad();
    r.mxfp4_scales = s.substr(p + mx.size(), s.size() - p - mx.size() - 1);
    s = s.substr(0, p);
  }
  if (auto p = s.find("[expert "); p != std::string::npos) {
    if (s.back() != ']') bad();
    try { r.expert = std::stoll(s.substr(p + 8, s.size() - p - 9)); } catch (...) { bad(); }
    if (r.expert < 0) bad();
    s = s.substr(0, p);
  }
  if (auto p = s.find("[head rows "); p != std::string::npos) {
    if (s.back() != ']') bad();
    const std::string range = s.substr(p + 11, s.size() - p - 12);
    const size_t colon = range.find(':'), of = range.find(" of ");
    if (colon == std::string::npos || of == std::string::npos || of < colon) bad();
    try {
      r.head_begin = std::stoll(range.substr(0, colon));
      r.head_end = std::stoll(range.substr(colon + 1, of - colon - 1));
      r.head_period = std::stoll(range.substr(of + 4));
    } catch (...) { bad(); }
    if (r.head_begin < 0 || r.head_end <= r.head_begin || r.head_period < r.head_end) bad();
    s = s.substr(0, p);
  }
  if (auto p = s.find("[rows "); p != std::string::npos) {
    if (s.back() != ']') bad();
    const std::string range = s.substr(p + 6, s.size() - p - 7);
    const size_t colon = range.find(':');
    if (colon == std::string::npos) bad();
    const size_t colon2 = range.find(':', colon + 1);
    const size_t colon3 = colon2 == std::string::npos ? std::string::npos : range.find(':', colon2 + 1);
    try {
      r.row_begin = std::stoll(range.substr(0, colon));
      r.row_end = std::stoll(range.substr(colon + 1, colon2 == std::string::npos ? std::string::npos : colon2 - colon - 1));
      if (colon2 != std::string::npos)
        r.row_step = std::stoll(range.substr(colon2 + 1, colon3 == std::string::npos ? std::string::npos : colon3 - colon2 - 1));
      if (colon3 != std::string::npos) r.row_block = std::stoll(range.substr(colon3 + 1));
    } catch (...) { bad(); }
    if (r.row_begin < 0 || r.row_end < r.row_begin || r.row_step < 1 || r.row_block < 1 || (r.row_end - r.row_begin) % r.row_block) bad();
    s = s.substr(0, p);
  }
  if (s.empty()) bad();
  r.name = s;
  return r;
}

// ---- RoPE row permutations ---------------------------------------------------------------

static Tensor permute_heads(const Tensor& t, int64_t heads, bool to_half_split, const std::string& where) {
  if (t.ndim() < 1 || t.ndim() > 2) fail(ErrorKind::Corrupt, where, "expected a matrix or a vector, found " + t.describe());
  if (!t.contiguous()) fail(ErrorKind::Internal, where, "non-contiguous tensor");
  const int64_t rows = t.dim(0);
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    fail(ErrorKind::Corrupt, where, std::to_string(rows) + " rows do not split into " + std::to_string(heads) + " heads of an even size");
  const int64_t d = rows / heads, half = d / 2;
  size_t unit;  // bytes moved per logical row
  if (t.ndim() == 2) unit = t.row_bytes();
  else {
    if (traits(t.dtype()).quantized) fail(ErrorKind::Unsupported, where, "cannot permute a quantized vector");
    unit = traits(t.dtype()).block_bytes;
  }
  Tensor out = Tensor::zeros(t.dtype(), t.shape());
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t inter = h * d + 2 * i + j, split = h * d + j * half + i;
        const int64_t from = to_half_split ? inter : split, to = to_half_split ? split : inter;
        std::memcpy(dst + to * unit, src + from * unit, unit);
      }
  return out;
}

Tensor deinterleave_heads(const Tensor& t, int64_t heads, const std::string& where) { return permute_heads(t, heads, true, where); }
Tensor interleave_heads(const Tensor& t, int64_t heads, const std::string& where) { return permute_heads(t, heads, false, where); }

// ---- strided rows, transposes and OpenAI's MXFP4 -------------------------------------------

namespace {

// Rows begin, begin + step, ... below end (elements of a vector), copied whole.
// The number of rows take_rows returns: the first row_block rows of every row_step blocks.
int64_t taken_rows(int64_t begin, int64_t end, int64_t step, int64_t block) {
  const int64_t blocks = (end - begin) / block;
  return (blocks + step - 1) / step * block;
}

Tensor take_rows(const Tensor& t, int64_t begin, int64_t end, int64_t step, int64_t block, const std::string& where) {
  if (step == 1) return t.slice_rows(begin, end);
  if (t.ndim() < 1 || t.ndim() > 2 || !t.contiguous() || (t.ndim() == 1 && traits(t.dtype()).quantized))
    fail(ErrorKind::Corrupt, where, "strided rows need a matrix or a float vector, found " + t.describe());
  std::vector<int64_t> shape = t.shape();
  shape[0] = taken_rows(begin, end, step, block);
  const size_t unit = t.ndim() == 2 ? t.row_bytes() : traits(t.dtype()).block_bytes;
  Tensor out = Tensor::zeros(t.dtype(), shape);
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < shape[0]; i += block)  // block i / block starts at row begin + (i / block) * step * block
    std::memcpy(dst + static_cast<size_t>(i) * unit, src + static_cast<size_t>(begin + i * step) * unit, unit * static_cast<size_t>(block));
  return out;
}

// Rows [begin, end) of every `period` rows of a matrix, copied whole.
Tensor take_head_rows(const Tensor& t, int64_t begin, int64_t end, int64_t period, const std::string& where) {
  if (t.ndim() != 2 || !t.contiguous() || t.dim(0) % period != 0)
    fail(ErrorKind::Corrupt, where, "per-head rows need a matrix of whole heads of " + std::to_string(period) + " rows, found " + t.describe());
  const int64_t heads = t.dim(0) / period, take = end - begin;
  Tensor out = Tensor::zeros(t.dtype(), {heads * take, t.dim(1)});
  const size_t unit = t.row_bytes();
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t h = 0; h < heads; ++h)
    std::memcpy(dst + static_cast<size_t>(h * take) * unit, src + static_cast<size_t>(h * period + begin) * unit, unit * static_cast<size_t>(take));
  return out;
}

// A float matrix [n a, b] as [n b, a], each [a, b] block transposed.
Tensor transposed_blocks(const Tensor& t, int64_t n, const std::string& where) {
  const DType d = t.dtype();
  if (t.ndim() != 2 || !t.contiguous() || (d != DType::F32 && d != DType::F16 && d != DType::BF16) || n < 1 || t.dim(0) % n != 0)
    fail(ErrorKind::Corrupt, where, "only a float matrix of " + std::to_string(n) + " row blocks can be transposed block by block, found " + t.describe());
  const int64_t a = t.dim(0) / n, b = t.dim(1);
  const size_t e = d == DType::F32 ? 4 : 2;
  Tensor out = Tensor::zeros(d, {n * b, a});
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::memcpy(dst + static_cast<size_t>((k * b + j) * a + i) * e, src + static_cast<size_t>((k * a + i) * b + j) * e, e);
  return out;
}

// A float matrix [a, b] as [b, a].
Tensor transposed(const Tensor& t, const std::string& where) {
  const DType d = t.dtype();
  if (t.ndim() != 2 || !t.contiguous() || (d != DType::F32 && d != DType::F16 && d != DType::BF16))
    fail(ErrorKind::Corrupt, where, "only a float matrix can be transposed, found " + t.describe());
  const int64_t a = t.dim(0), b = t.dim(1);
  const size_t e = d == DType::F32 ? 4 : 2;
  Tensor out = Tensor::zeros(d, {b, a});
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::memcpy(dst + static_cast<size_t>(j * a + i) * e, src + static_cast<size_t>(i * b + j) * e, e);
  return out;
}

// OpenAI's MXFP4 (blocks [R, n, 16]: element 2i in the low nibble of byte i, 2i + 1 in the high;
// scales [R, n]: E8M0 exponents) as ggml's / ptn's MXFP4 [R, 32 n] (element j in the low nibble
// of byte j, j + 16 in the high; the same exponent byte and the same E2M1 codes).
Tensor mxfp4_from_openai(const Tensor& blocks, const Tensor& scales, const std::string& where) {
  if (blocks.ndim() != 3 || blocks.dim(2) != 16 || scales.ndim() != 2 || scales.dim(0) != blocks.dim(0) ||
      scales.dim(1) != blocks.dim(1) || !blocks.contiguous() || !scales.contiguous())
    fail(ErrorKind::Corrupt, where, "MXFP4 blocks " + blocks.describe() + " and scales " + scales.describe() +
                                        " are not [rows, n, 16] and [rows, n]");
  const int64_t rows = blocks.dim(0), nb = blocks.dim(1);
  Tensor out = Tensor::zeros(DType::MXFP4, {rows, nb * QK_MXFP4});
  const uint8_t* b = static_cast<const uint8_t*>(blocks.data());
  const uint8_t* e = static_cast<const uint8_t*>(scales.data());
  auto* dst = static_cast<BlockMXFP4*>(out.data());
  for (int64_t i = 0; i < rows * nb; ++i, b += 16) {
    auto code = [&](int k) { return (b[k / 2] >> (4 * (k % 2))) & 0x0F; };
    dst[i].e = e[i];
    for (int j = 0; j < 16; ++j) dst[i].qs[j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
  }
  return out;
}

// Matrix (or vector) `e` of a tensor with experts outermost.
Tensor expert_slice(const Tensor& t, int64_t e) {
  std::vector<int64_t> shape(t.shape().begin() + 1, t.shape().end());
  return t.slice_rows(e, e + 1).reshaped(shape);
}

}  // namespace

// ---- mapped sources (GGUF / safetensors) ---------------------------------------------------

namespace {

class MappedSource final : public WeightSource {
 public:
  ModelSpec spec_;
  std::string description_;
  std::shared_ptr<GgufFile> gguf_;
  std::shared_ptr<SafetensorsSet> st_;
  std::vector<std::string> extra_files_;  // config.json etc.
  std::map<std::string, TensorSourceRef> recipes_;
  std::map<std::string, std::vector<int64_t>> reshaped_;  // canonical tensors stored in another shape of the same bytes

  const ModelSpec& spec() const override { return spec_; }
  std::string describe() const override { return description_; }

  std::optional<TokenizerSpec> tokenizer() const override {
    if (gguf_ && gguf_has_tokenizer(*gguf_)) return tokenizer_spec_from_gguf(*gguf_);
    return std::nullopt;
  }
  bool has(const std::string& name) const override { return recipes_.count(name) != 0; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [n, r] : recipes_) out.push_back(n);
    return out;
  }

  Tensor raw(const std::string& name) const { return gguf_ ? gguf_->tensor(name) : st_->tensor(name); }
  std::vector<int64_t> raw_shape(const std::string& name) const {
    if (gguf_) {
      const GgufTensorInfo* t = gguf_->find_tensor(name);
      return t ? t->shape : std::vector<int64_t>{-1};
    }
    const SafetensorsInfo* t = st_->find(name);
    return t ? t->shape : std::vector<int64_t>{-1};
  }
  std::string source_path(const std::string& name) const { return gguf_ ? gguf_->path() : st_->file_of(name); }

  std::vector<std::string> unused_source_tensors() const override {
    std::set<std::string> used;
    std::vector<std::string> out;
    if (st_) {
      for (const auto& [n, r] : recipes_) {
        used.insert(r.name);
        if (!r.mxfp4_scales.empty()) used.insert(r.mxfp4_scales);
      }
      for (const std::string& n : st_->names())
        if (!used.count(n)) out.push_back(n);
      return out;
    }
    if (!gguf_) return out;
    // A GGUF maps every tensor it holds to a canonical name; the ones the model reads are those
    // the spec's canonical list names (rope_freqs.weight was read into the spec's RoPE scaling).
    const std::vector<std::string> canon = canonical_tensor_names(spec_);
    const std::set<std::string> wanted(canon.begin(), canon.end());
    for (const auto& [n, r] : recipes_)
      if (wanted.count(n)) used.insert(r.name);
    const FamilyInfo* fam = find_family(spec_.family);
    if (fam && fam->gguf_rope_freqs) used.insert("rope_freqs.weight");
    for (const GgufTensorInfo& t : gguf_->tensors())
      if (!used.count(t.name)) out.push_back(t.name);
    return out;
  }

  Tensor get(const std::string& name) const override {
    auto it = recipes_.find(name);
    if (it == recipes_.end()) fail(ErrorKind::InvalidArgument, description_ + ": tensor '" + name + "'", "no such tensor");
    const TensorSourceRef& r = it->second;
    const std::string where = source_path(r.name) + ": tensor '" + r.name + "'";
    const bool mx = !r.mxfp4_scales.empty();
    if (mx && !st_) fail(ErrorKind::Internal, where, "MXFP4 blocks with scales come from safetensors only");
    Tensor t = mx ? st_->u8_bytes(r.name) : raw(r.name);
    if (r.expert >= 0) t = expert_slice(t, r.expert);
    if (mx) {
      Tensor sc = st_->u8_bytes(r.mxfp4_scales);
      if (r.expert >= 0) sc = expert_slice(sc, r.expert);
      t = mxfp4_from_openai(t, sc, where);
    }
    if (r.transposed) t = transposed(t, where);
    if (r.row_begin >= 0) t = take_rows(t, r.row_begin, r.row_end, r.row_step, r.row_block, where);
    if (r.head_period > 0) t = take_head_rows(t, r.head_begin, r.head_end, r.head_period, where);
    if (r.transposed_blocks > 0) t = transposed_blocks(t, r.transposed_blocks, where);
    if (r.interleaved_heads > 0) t = deinterleave_heads(t, r.interleaved_heads, where);
    if (auto rs = reshaped_.find(name); rs != reshaped_.end()) t = (t.contiguous() ? t : t.copy()).reshaped(rs->second);
    return t;
  }

  std::vector<SourceFile> source_files() const override {
    std::vector<std::string> paths = extra_files_;
    if (gguf_) paths.push_back(gguf_->path());
    if (st_) for (const auto& f : st_->files()) paths.push_back(f->path());
    std::vector<SourceFile> out;
    for (const auto& p : paths) {
      auto m = MappedFile::open(p);
      out.push_back({p, m->size(), sha256_hex(m->data(), m->size())});
    }
    return out;
  }

  // Resolves every tensor source, checks presence and shapes; called once at open.
  void resolve(const std::function<std::string(const std::string&)>& locate) {
    // Canonical order first, so the first problem reported is the first tensor of the model.
    std::vector<std::string> order;
    for (const auto& n : canonical_tensor_names(spec_))
      if (spec_.tensor_sources.count(n)) order.push_back(n);
    for (const auto& [n, text] : spec_.tensor_sources)
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
    for (const std::string& canon : order) {
      TensorSourceRef r = parse_tensor_source(spec_.tensor_sources.at(canon));
      const std::string found = locate(r.name);
      if (found.empty()) fail(ErrorKind::Corrupt, description_ + ": tensor '" + r.name + "'", "missing (needed for " + canon + ")");
      r.name = found;
      std::vector<int64_t> shape = raw_shape(r.name);
      const std::string where = source_path(r.name) + ": tensor '" + r.name + "'";
      if (r.expert >= 0) {
        if (shape.size() < 2 || r.expert >= shape[0])
          fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " is not [experts > " + std::to_string(r.expert) + ", ...] (needed for " + canon + ")");
        shape.erase(shape.begin());
      }
      if (!r.mxfp4_scales.empty()) {
        const std::string sname = locate(r.mxfp4_scales);
        if (sname.empty()) fail(ErrorKind::Corrupt, description_ + ": tensor '" + r.mxfp4_scales + "'", "missing (the scales of " + r.name + ", needed for " + canon + ")");
        r.mxfp4_scales = sname;
        std::vector<int64_t> ss = raw_shape(sname);
        if (r.expert >= 0) {  // the scales hold the same experts as the blocks
          if (ss.size() < 2 || r.expert >= ss[0])
            fail(ErrorKind::Corrupt, source_path(sname) + ": tensor '" + sname + "'",
                 "shape " + shape_str(ss) + " is not [experts > " + std::to_string(r.expert) + ", ...] (the scales of " + r.name + ", needed for " + canon + ")");
          ss.erase(ss.begin());
        }
        const SafetensorsInfo* bi = st_ ? st_->find(r.name) : nullptr;
        const SafetensorsInfo* si = st_ ? st_->find(sname) : nullptr;
        if (!bi || !si || bi->dtype != "U8" || si->dtype != "U8" || shape.size() != 3 || shape[2] != 16 ||
            ss != std::vector<int64_t>{shape[0], shape[1]})
          fail(ErrorKind::Corrupt, where, "MXFP4 blocks " + shape_str(shape) + " with scales " + shape_str(ss) +
                                              " are not U8 [rows, n, 16] and U8 [rows, n] (needed for " + canon + ")");
        shape = {shape[0], shape[1] * QK_MXFP4};
      }
      if (r.transposed) {
        if (shape.size() != 2) fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " is not a matrix to transpose (needed for " + canon + ")");
        std::swap(shape[0], shape[1]);
      }
      if (r.row_begin >= 0) {
        if (shape.empty() || r.row_end > shape[0])
          fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " has fewer than " + std::to_string(r.row_end) + " rows (needed for " + canon + ")");
        shape[0] = taken_rows(r.row_begin, r.row_end, r.row_step, r.row_block);
      }
      if (r.head_period > 0) {
        if (shape.size() != 2 || shape[0] % r.head_period != 0)
          fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " is not a matrix of whole heads of " + std::to_string(r.head_period) + " rows (needed for " + canon + ")");
        shape[0] = shape[0] / r.head_period * (r.head_end - r.head_begin);
      }
      if (r.transposed_blocks > 0) {
        if (shape.size() != 2 || shape[0] % r.transposed_blocks != 0)
          fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " does not split into " + std::to_string(r.transposed_blocks) + " row blocks (needed for " + canon + ")");
        shape = {r.transposed_blocks * shape[1], shape[0] / r.transposed_blocks};
      }
      std::vector<int64_t> want = canonical_tensor_shape(spec_, canon);
      // The same bytes in another shape: a one-row matrix stored as a vector (llama.cpp's
      // ffn_gate_inp_shexp), a matrix of heads stored [heads, rows, cols] (llama.cpp's attn_k_b /
      // attn_v_b).
      const bool one_row = want.size() == 2 && want[0] == 1 && shape.size() == 1 && shape[0] == want[1];
      const bool per_head = want.size() == 2 && shape.size() == 3 && shape[2] == want[1] && shape[1] > 0 &&
                            shape[0] * shape[1] == want[0] && !r.transposed && r.row_begin < 0 && r.head_period == 0 &&
                            r.transposed_blocks == 0 && r.interleaved_heads == 0 && r.expert < 0;
      if (one_row || per_head) {
        reshaped_[canon] = want;
        shape = want;
      }
      if (!want.empty() && shape != want)
        fail(ErrorKind::Corrupt, where, "shape " + shape_str(shape) + " does not match the model (" + canon + " should be " + shape_str(want) + ")");
      recipes_[canon] = r;
    }
    for (const char* need : {"token_embd.weight", "output_norm.weight"})
      if (!recipes_.count(need)) fail(ErrorKind::Corrupt, description_, std::string("no tensor for ") + need);
    if (!spec_.tie_word_embeddings && !recipes_.count("output.weight"))
      fail(ErrorKind::Corrupt, description_, "output.weight missing and the embeddings are not tied");
  }
};

std::string join_dir(const std::string& dir, const std::string& name) {
  return (dir.empty() || dir.back() == '/') ? dir + name : dir + "/" + name;
}

std::string parent_dir(const std::string& path) {
  size_t p = path.find_last_of('/');
  return p == std::string::npos ? "." : path.substr(0, p);
}

// HF checkpoints nest the text model differently (Gemma 3 and Llama 4 multimodal wrappers, bare
// text models).
std::function<std::string(const std::string&)> hf_locator(const SafetensorsSet& st) {
  return [&st](const std::string& name) -> std::string {
    std::vector<std::string> cands = {name, "language_model." + name};
    if (name.rfind("model.", 0) == 0) cands.push_back("model.language_model." + name.substr(6));
    // A text model saved without its causal-LM wrapper (Qwen3Model, as sentence-transformers
    // saves Qwen3-Embedding) has no "model." prefix.
    if (name.rfind("model.", 0) == 0) cands.push_back(name.substr(6));
    for (const auto& c : cands)
      if (st.has(c)) return c;
    return "";
  };
}

// A tied checkpoint may keep its embedding only as the classifier's alias (transformers writes
// `lm_head.weight` for some models): read the embedding from there.
void use_tied_alias(ModelSpec& s, const std::function<std::string(const std::string&)>& locate) {
  if (!s.tie_word_embeddings || !s.tensor_sources.count("token_embd.weight")) return;
  const FamilyInfo* fam = find_family(s.family);
  if (!fam) return;
  const std::string emb = s.tensor_sources.at("token_embd.weight");
  if (!locate(emb).empty() || locate(fam->hf_names.output).empty()) return;
  s.tensor_sources["token_embd.weight"] = fam->hf_names.output;
  s.source_notes.push_back(std::string("tied embedding read from ") + fam->hf_names.output + " (the checkpoint has no " + emb + ")");
}

}  // namespace

std::unique_ptr<WeightSource> open_weights(const std::string& path, const std::string& gguf_weights) {
  auto src = std::make_unique<MappedSource>();
  if (is_directory(path)) {
    const std::string cfg = join_dir(path, "config.json");
    if (!file_exists(cfg)) fail(ErrorKind::InvalidArgument, path, "a directory without config.json is not an HF model");
    src->spec_ = model_spec_from_hf_config_file(cfg);
    src->extra_files_.push_back(cfg);
    if (!gguf_weights.empty()) {
      src->gguf_ = GgufFile::open(gguf_weights);
      src->description_ = "HF directory " + path + " with weights from GGUF " + gguf_weights;
      ModelSpec gs = model_spec_from_gguf(*src->gguf_);
      ModelSpec& s = src->spec_;
      auto check = [&](const char* what, int64_t a, int64_t b) {
        if (a != b) fail(ErrorKind::InvalidArgument, gguf_weights, std::string(what) + " " + std::to_string(b) + " differs from the config's " + std::to_string(a));
      };
      const std::string want_arch = gguf_arch_for(s);
      if (gs.architecture != want_arch)
        fail(ErrorKind::InvalidArgument, gguf_weights, "GGUF architecture '" + gs.architecture + "' does not match the config's " + s.architecture + " (expected '" + want_arch + "')");
      check("hidden size", s.hidden_size, gs.hidden_size);
      check("layer count", s.n_layers, gs.n_layers);
      check("head count", s.n_heads, gs.n_heads);
      check("kv head count", s.n_kv_heads, gs.n_kv_heads);
      check("vocabulary size", s.vocab_size, gs.vocab_size);
      check("feed-forward size", s.intermediate_size, gs.intermediate_size);
      check("expert count", s.n_experts, gs.n_experts);
      check("experts used per token", s.n_experts_used, gs.n_experts_used);
      check("expert feed-forward size", s.expert_ffn_size, gs.expert_ffn_size);
      s.tensor_sources = gs.tensor_sources;
      s.norm_weight_plus_one = gs.norm_weight_plus_one;
      s.tie_word_embeddings = gs.tie_word_embeddings;
      s.source_notes.insert(s.source_notes.end(), gs.source_notes.begin(), gs.source_notes.end());
      const GgufFile& g = *src->gguf_;
      src->resolve([&g](const std::string& n) { return g.find_tensor(n) ? n : std::string(); });
      return src;
    }
    src->st_ = SafetensorsSet::open_dir(path);
    src->description_ = "HF directory " + path;
    use_tied_alias(src->spec_, hf_locator(*src->st_));
    src->resolve(hf_locator(*src->st_));
    return src;
  }
  if (!gguf_weights.empty()) fail(ErrorKind::InvalidArgument, path, "separate GGUF weights need an HF directory");
  if (!file_exists(path)) fail(ErrorKind::Io, path, "no such file or directory");
  if (looks_like_gguf(path)) {
    src->gguf_ = GgufFile::open(path);
    src->description_ = "GGUF file " + path;
    src->spec_ = model_spec_from_gguf(*src->gguf_);
    const GgufFile& g = *src->gguf_;
    src->resolve([&g](const std::string& n) { return g.find_tensor(n) ? n : std::string(); });
    return src;
  }
  if (looks_like_safetensors(path)) {
    const std::string cfg = join_dir(parent_dir(path), "config.json");
    if (!file_exists(cfg)) fail(ErrorKind::InvalidArgument, path, "a safetensors file needs a config.json beside it");
    src->spec_ = model_spec_from_hf_config_file(cfg);
    src->extra_files_.push_back(cfg);
    src->st_ = SafetensorsSet::open_file(path);
    src->description_ = "safetensors file " + path;
    use_tied_alias(src->spec_, hf_locator(*src->st_));
    src->resolve(hf_locator(*src->st_));
    return src;
  }
  fail(ErrorKind::InvalidArgument, path, "not a GGUF file, a safetensors file or an HF model directory");
}

// ---- unused source tensors -----------------------------------------------------------------

UnusedTensors classify_unused_tensors(const ModelSpec& spec, const std::vector<std::string>& unused) {
  // Known optional parts: the first name component (after a leading "model.") of a multimodal
  // checkpoint's other towers, and what transformers recomputes or ties itself.
  struct Part {
    const char* what;
    std::vector<std::string> roots;
    int64_t count = 0;
  };
  std::vector<Part> parts = {
      {"vision tower left out: text-only program", {"vision_tower", "vision_model", "multi_modal_projector", "visual", "vision_embed_tokens", "embed_vision", "image_newline"}},
      {"audio tower left out: text-only program", {"audio_tower", "audio_model", "embed_audio"}},
  };
  const FamilyInfo* fam = find_family(spec.family);
  const std::string tied_alias = fam ? fam->hf_names.output : "lm_head.weight";
  bool alias_left = false;
  int64_t inv_freq = 0, masks = 0, mtp = 0;
  // DeepSeek V3's multi-token-prediction module, stored as the layers after the last one
  // (model.layers.61.* of a 61-layer V3): a draft head the program does not run.
  auto mtp_layer = [&](const std::string& rest) {
    if (spec.mtp_layers <= 0 || rest.rfind("layers.", 0) != 0) return false;
    const std::string idx = rest.substr(7, rest.find('.', 7) - 7);
    if (idx.empty() || idx.size() > 6 || idx.find_first_not_of("0123456789") != std::string::npos) return false;
    const int64_t i = std::stoll(idx);
    return i >= spec.n_layers && i < spec.n_layers + spec.mtp_layers;
  };
  UnusedTensors out;
  auto ends = [](const std::string& s, const std::string& suf) { return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0; };
  for (const std::string& n : unused) {
    std::string rest = n.rfind("model.", 0) == 0 ? n.substr(6) : n;
    const std::string root = rest.substr(0, rest.find('.'));
    bool known = false;
    for (Part& p : parts)
      if (std::find(p.roots.begin(), p.roots.end(), root) != p.roots.end()) { ++p.count; known = true; }
    if (!known && spec.tie_word_embeddings && (n == tied_alias || n == "language_model." + tied_alias)) { alias_left = known = true; }
    if (!known && ends(n, ".rotary_emb.inv_freq")) { ++inv_freq; known = true; }
    if (!known && n.rfind("model.", 0) == 0 && mtp_layer(rest)) { ++mtp; known = true; }
    // GPT-NeoX checkpoints of older transformers: the causal mask and its fill value as buffers.
    if (!known && spec.family == "gptneox" && (ends(n, ".attention.bias") || ends(n, ".attention.masked_bias"))) { ++masks; known = true; }
    if (!known) out.refused.push_back(n);
  }
  for (const Part& p : parts)
    if (p.count) out.notes.push_back(std::string(p.what) + " (" + std::to_string(p.count) + (p.count == 1 ? " tensor)" : " tensors)"));
  if (alias_left) out.notes.push_back(tied_alias + " left out: tie_word_embeddings is true, so the embedding is the classifier (as transformers ties them)");
  if (masks) out.notes.push_back("attention.bias / masked_bias buffers left out: the causal mask is the runtime's (" + std::to_string(masks) + " tensors)");
  if (mtp) out.notes.push_back("multi-token-prediction layers after the last layer left out: the program predicts the next token only (" + std::to_string(mtp) + (mtp == 1 ? " tensor)" : " tensors)"));
  if (inv_freq) out.notes.push_back("rotary_emb.inv_freq buffers left out: recomputed from the config (" + std::to_string(inv_freq) + (inv_freq == 1 ? " tensor)" : " tensors)"));
  return out;
}

}  // namespace ptn
