#include "formats/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/reader.h"

namespace ptn {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32

uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

// ggml's names of the tensor types ptn does not read (yet), by GGUF type id, so that a refusal
// names the type; nullptr for ids ggml never used or has retired.
const char* unsupported_tensor_type_name(uint32_t id) {
  switch (id) {
    case 9: return "Q8_1";
    case 15: return "Q8_K";  // an activation format, never a weight
    default: return nullptr;
  }
}

std::string read_string(ByteReader& r, const char* field) {
  uint64_t n = r.read<uint64_t>(field);
  return std::string(r.string(n, GgufLimits::kMaxString, field));
}

std::string_view read_string_view(ByteReader& r, const char* field) {
  uint64_t n = r.read<uint64_t>(field);
  return r.string(n, GgufLimits::kMaxString, field);
}

void read_scalar(ByteReader& r, GgufType t, GgufValue& v, const char* field) {
  switch (t) {
    case GgufType::U8: v.u = r.read<uint8_t>(field); break;
    case GgufType::I8: v.i = r.read<int8_t>(field); break;
    case GgufType::U16: v.u = r.read<uint16_t>(field); break;
    case GgufType::I16: v.i = r.read<int16_t>(field); break;
    case GgufType::U32: v.u = r.read<uint32_t>(field); break;
    case GgufType::I32: v.i = r.read<int32_t>(field); break;
    case GgufType::U64: v.u = r.read<uint64_t>(field); break;
    case GgufType::I64: v.i = r.read<int64_t>(field); break;
    case GgufType::F32: v.f = r.read<float>(field); break;
    case GgufType::F64: v.f = r.read<double>(field); break;
    case GgufType::Bool: {
      uint8_t b = r.read<uint8_t>(field);
      if (b > 1) r.corrupt(field, "bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.u = b;
      break;
    }
    default: r.corrupt(field, "not a scalar type");
  }
}

void read_value(ByteReader& r, GgufType t, GgufValue& v, int depth, const char* field) {
  const size_t start = r.pos();
  v.type = t;
  if (t == GgufType::String) {
    v.str = read_string_view(r, field);
  } else if (t == GgufType::Array) {
    if (depth >= GgufLimits::kMaxArrayDepth)
      r.corrupt(field, "arrays nested deeper than " + std::to_string(GgufLimits::kMaxArrayDepth));
    uint32_t et = r.read<uint32_t>(field);
    if (!known_type(et)) r.corrupt(field, "unknown array element type " + std::to_string(et));
    v.elem_type = static_cast<GgufType>(et);
    v.count = r.read<uint64_t>(field);
    if (v.count > GgufLimits::kMaxArray)
      r.corrupt(field, "array of " + std::to_string(v.count) + " elements exceeds the limit of " +
                           std::to_string(GgufLimits::kMaxArray));
    if (v.elem_type == GgufType::String) {
      // Each string needs at least its 8-byte length: reject impossible counts before reserving.
      if (v.count > r.remaining() / 8) r.corrupt(field, "array of " + std::to_string(v.count) + " strings is longer than the file");
      v.strings.reserve(v.count);
      for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(read_string_view(r, field));
    } else if (v.elem_type == GgufType::Array) {
      if (v.count > r.remaining() / 12) r.corrupt(field, "array of " + std::to_string(v.count) + " arrays is longer than the file");
      v.items.resize(v.count);
      for (uint64_t k = 0; k < v.count; ++k) read_value(r, GgufType::Array, v.items[k], depth + 1, field);
    } else {
      uint64_t bytes = checked_mul(v.count, gguf_scalar_size(v.elem_type), r.where(field));
      v.raw = r.bytes(bytes, field);
      if (v.elem_type == GgufType::Bool)
        for (uint64_t k = 0; k < v.count; ++k)
          if (v.raw[k] > 1) r.corrupt(field, "bool array element " + std::to_string(k) + " is neither 0 nor 1");
    }
  } else {
    read_scalar(r, t, v, field);
  }
  v.encoded = std::string_view(reinterpret_cast<const char*>(r.base() + start), r.pos() - start);
}

// Element k of a numeric array as double / int64 (no range issues for the types involved).
double array_elem_f(const GgufValue& v, uint64_t k) {
  const uint8_t* p = v.raw + k * gguf_scalar_size(v.elem_type);
  switch (v.elem_type) {
    case GgufType::F32: { float x; std::memcpy(&x, p, 4); return x; }
    case GgufType::F64: { double x; std::memcpy(&x, p, 8); return x; }
    default: return 0;
  }
}

bool array_elem_int(const GgufValue& v, uint64_t k, int64_t& out) {
  const uint8_t* p = v.raw + k * gguf_scalar_size(v.elem_type);
  switch (v.elem_type) {
    case GgufType::U8: case GgufType::Bool: out = *p; return true;
    case GgufType::I8: out = static_cast<int8_t>(*p); return true;
    case GgufType::U16: { uint16_t x; std::memcpy(&x, p, 2); out = x; return true; }
    case GgufType::I16: { int16_t x; std::memcpy(&x, p, 2); out = x; return true; }
    case GgufType::U32: { uint32_t x; std::memcpy(&x, p, 4); out = x; return true; }
    case GgufType::I32: { int32_t x; std::memcpy(&x, p, 4); out = x; return true; }
    case GgufType::I64: { int64_t x; std::memcpy(&x, p, 8); out = x; return true; }
    case GgufType::U64: {
      uint64_t x; std::memcpy(&x, p, 8);
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      out = static_cast<int64_t>(x);
      return true;
    }
    default: return false;
  }
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

static std::string quote(std::string_view s, size_t max = 60) {
  std::string out = "\"";
  for (size_t k = 0; k < s.size() && k < max; ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); out += b; }
    else out += static_cast<char>(c);
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out + "\"";
}

std::string GgufValue::describe(size_t max_items) const {
  std::string s = gguf_type_name(type);
  switch (type) {
    case GgufType::String: return s + " " + quote(str);
    case GgufType::Bool: return s + (u ? " true" : " false");
    case GgufType::F32: case GgufType::F64: { char b[40]; std::snprintf(b, sizeof b, " %.9g", f); return s + b; }
    case GgufType::U8: case GgufType::U16: case GgufType::U32: case GgufType::U64: return s + " " + std::to_string(u);
    case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64: return s + " " + std::to_string(i);
    case GgufType::Array: break;
  }
  s = std::string("array[") + std::to_string(count) + "] of " + gguf_type_name(elem_type) + ": [";
  uint64_t shown = std::min<uint64_t>(count, max_items);
  for (uint64_t k = 0; k < shown; ++k) {
    if (k) s += ", ";
    if (elem_type == GgufType::String) s += quote(strings[k], 24);
    else if (elem_type == GgufType::Array) s += items[k].describe(3);
    else if (elem_type == GgufType::F32 || elem_type == GgufType::F64) { char b[32]; std::snprintf(b, sizeof b, "%.6g", array_elem_f(*this, k)); s += b; }
    else { int64_t x = 0; if (array_elem_int(*this, k, x)) s += std::to_string(x); else s += "(large)"; }
  }
  if (count > shown) s += ", ... " + std::to_string(count - shown) + " more";
  return s + "]";
}

bool looks_like_gguf(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char m[4] = {};
  size_t n = std::fread(m, 1, 4, f);
  std::fclose(f);
  return n == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

uint64_t GgufFile::file_size() const { return file_->size(); }

std::shared_ptr<GgufFile> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  auto g = std::shared_ptr<GgufFile>(new GgufFile());
  g->file_ = file;
  g->path_ = file->path();
  ByteReader r(file->data(), file->size(), g->path_);

  uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kGgufMagic) r.corrupt("magic", "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  uint32_t version = r.read<uint32_t>("version");
  if ((version & 0xffffu) == 0 && bswap32(version) >= 1 && bswap32(version) <= 3)
    fail(ErrorKind::Unsupported, r.where("version"),
         "big-endian GGUF (version " + std::to_string(bswap32(version)) +
             " stored byte-swapped); ptn reads little-endian GGUF only");
  if (version == 1) fail(ErrorKind::Unsupported, r.where("version"), "GGUF version 1 is not supported (versions 2 and 3 are)");
  if (version != 2 && version != 3)
    fail(ErrorKind::Unsupported, r.where("version"), "unknown GGUF version " + std::to_string(version));
  g->version_ = version;
  uint64_t n_tensors = r.read<uint64_t>("tensor_count");
  uint64_t n_kv = r.read<uint64_t>("metadata_kv_count");
  if (n_tensors > GgufLimits::kMaxTensors)
    r.corrupt("tensor_count", std::to_string(n_tensors) + " tensors exceed the limit of " + std::to_string(GgufLimits::kMaxTensors));
  if (n_kv > GgufLimits::kMaxKv)
    r.corrupt("metadata_kv_count", std::to_string(n_kv) + " key/values exceed the limit of " + std::to_string(GgufLimits::kMaxKv));

  // Metadata.
  g->kv_.reserve(std::min<uint64_t>(n_kv, r.remaining() / 13));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = read_string(r, "metadata key");
    if (key.empty()) r.corrupt("metadata key", "empty key (key/value " + std::to_string(k) + ")");
    const std::string field = "value of '" + key + "'";
    uint32_t type = r.read<uint32_t>(field.c_str());
    if (!known_type(type)) r.corrupt(field.c_str(), "unknown value type " + std::to_string(type));
    GgufValue v;
    read_value(r, static_cast<GgufType>(type), v, 0, field.c_str());
    if (g->kv_index_.count(key)) r.corrupt("metadata key", "duplicate key '" + key + "'");
    g->kv_index_.emplace(key, g->kv_.size());
    g->kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g->find("general.alignment")) {
    if (!a->is_integer() || a->type == GgufType::I8 || a->type == GgufType::I16 || a->type == GgufType::I32 || a->type == GgufType::I64)
      fail(ErrorKind::Corrupt, g->where_key("general.alignment"), std::string("expected an unsigned integer, found ") + gguf_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > GgufLimits::kMaxAlignment)
      fail(ErrorKind::Corrupt, g->where_key("general.alignment"),
           "alignment " + std::to_string(a->u) + " is not a non-zero power of two (at most " + std::to_string(GgufLimits::kMaxAlignment) + ")");
    g->alignment_ = a->u;
  }

  // Tensor infos.
  struct Raw { uint64_t rel_offset; };
  std::vector<Raw> raw;
  g->tensors_.reserve(std::min<uint64_t>(n_tensors, r.remaining() / 24));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = read_string(r, "tensor name");
    const std::string field = "tensor '" + t.name + "'";
    const char* f = field.c_str();
    uint32_t n_dims = r.read<uint32_t>(f);
    if (n_dims > static_cast<uint32_t>(kMaxDims)) r.corrupt(f, std::to_string(n_dims) + " dimensions (at most 4)");
    std::vector<int64_t> dims(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = r.read<uint64_t>(f);
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) r.corrupt(f, "negative dimension " + std::to_string(static_cast<int64_t>(dim)));
      numel = checked_mul(numel, dim, r.where(f) + " element count");
      if (numel > (uint64_t{1} << 50)) r.corrupt(f, "element count overflows");
      dims[d] = static_cast<int64_t>(dim);
    }
    uint32_t type = r.read<uint32_t>(f);
    auto tr = dtype_traits(type);
    if (!tr || type == static_cast<uint32_t>(DType::Q8_K)) {
      const char* name = unsupported_tensor_type_name(type);
      fail(ErrorKind::Unsupported, r.where(f),
           name ? std::string("tensor type ") + name + " (GGUF type " + std::to_string(type) +
                      ") is not supported by ptn; it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                      "MXFP4, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, TQ1_0 and TQ2_0"
                : "unknown tensor type " + std::to_string(type));
    }
    t.dtype = static_cast<DType>(type);
    int64_t row = n_dims ? dims[0] : 1;
    if (row % tr->block_size != 0)
      r.corrupt(f, "row of " + std::to_string(row) + " elements is not a multiple of the " + tr->name + " block (" + std::to_string(tr->block_size) + ")");
    uint64_t rel = r.read<uint64_t>(f);
    t.shape.assign(dims.rbegin(), dims.rend());
    t.nbytes = checked_mul(numel / tr->block_size, tr->block_bytes, r.where(f) + " size");
    if (g->tensor_index_.count(t.name)) r.corrupt("tensor name", "duplicate tensor name '" + t.name + "'");
    g->tensor_index_.emplace(t.name, g->tensors_.size());
    g->tensors_.push_back(std::move(t));
    raw.push_back({rel});
  }

  // Data section: aligned start; each tensor aligned, inside the file, not overlapping another.
  uint64_t data_start = (static_cast<uint64_t>(r.pos()) + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  if (n_tensors > 0 && data_start > file->size())
    r.corrupt("tensor data", "the data section starts at " + std::to_string(data_start) + ", past the end of the file (" + std::to_string(file->size()) + " bytes)");
  g->data_offset_ = data_start;
  std::vector<size_t> order(g->tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) {
    GgufTensorInfo& t = g->tensors_[k];
    const std::string w = g->path_ + ": tensor '" + t.name + "'";
    if (raw[k].rel_offset % g->alignment_ != 0)
      fail(ErrorKind::Corrupt, w, "data offset " + std::to_string(raw[k].rel_offset) + " is not a multiple of the alignment " + std::to_string(g->alignment_));
    t.offset = checked_add(data_start, raw[k].rel_offset, w + " offset");
    uint64_t end = checked_add(t.offset, t.nbytes, w + " end");
    if (end > file->size())
      fail(ErrorKind::Corrupt, w, "data [" + std::to_string(t.offset) + ", " + std::to_string(end) + ") lies outside the file (" + std::to_string(file->size()) + " bytes)");
    order[k] = k;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g->tensors_[a].offset < g->tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& a = g->tensors_[order[k - 1]];
    const GgufTensorInfo& b = g->tensors_[order[k]];
    if (a.nbytes > 0 && b.nbytes > 0 && a.offset + a.nbytes > b.offset)
      fail(ErrorKind::Corrupt, g->path_ + ": tensor '" + b.name + "'",
           "data at " + std::to_string(b.offset) + " overlaps tensor '" + a.name + "' [" + std::to_string(a.offset) + ", " + std::to_string(a.offset + a.nbytes) + ")");
  }
  return g;
}

std::string GgufFile::where_key(const std::string& key) const { return path_ + ": key '" + key + "'"; }

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(ErrorKind::Corrupt, where_key(key), "missing");
  return *v;
}

static int64_t as_int(const GgufFile& g, const std::string& key, const GgufValue& v, int64_t lo, uint64_t hi, const char* want) {
  auto bad = [&](const std::string& why) { fail(ErrorKind::Corrupt, g.where_key(key), why); };
  if (!v.is_integer()) bad(std::string("expected ") + want + ", found " + gguf_type_name(v.type));
  bool is_unsigned = v.type == GgufType::U8 || v.type == GgufType::U16 || v.type == GgufType::U32 || v.type == GgufType::U64;
  if (is_unsigned) {
    if (v.u > hi) bad("value " + std::to_string(v.u) + " does not fit " + want);
    return static_cast<int64_t>(v.u);
  }
  if (v.i < lo || (v.i > 0 && static_cast<uint64_t>(v.i) > hi)) bad("value " + std::to_string(v.i) + " does not fit " + want);
  return v.i;
}

uint32_t GgufFile::get_u32(const std::string& key) const {
  return static_cast<uint32_t>(as_int(*this, key, get(key), 0, std::numeric_limits<uint32_t>::max(), "u32"));
}
uint64_t GgufFile::get_u64(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type == GgufType::U64) return v.u;
  return static_cast<uint64_t>(as_int(*this, key, v, 0, std::numeric_limits<int64_t>::max(), "u64"));
}
int64_t GgufFile::get_i64(const std::string& key) const {
  return as_int(*this, key, get(key), std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), "i64");
}
int32_t GgufFile::get_i32(const std::string& key) const {
  return static_cast<int32_t>(as_int(*this, key, get(key), std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), "i32"));
}
float GgufFile::get_f32(const std::string& key) const {
  const GgufValue& v = get(key);
  if (!v.is_float()) fail(ErrorKind::Corrupt, where_key(key), std::string("expected f32, found ") + gguf_type_name(v.type));
  return static_cast<float>(v.f);
}
bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufType::Bool) fail(ErrorKind::Corrupt, where_key(key), std::string("expected bool, found ") + gguf_type_name(v.type));
  return v.u != 0;
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufType::String) fail(ErrorKind::Corrupt, where_key(key), std::string("expected string, found ") + gguf_type_name(v.type));
  return std::string(v.str);
}
std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufType::Array || v.elem_type != GgufType::String)
    fail(ErrorKind::Corrupt, where_key(key), "expected an array of strings, found " + v.describe(0));
  return {v.strings.begin(), v.strings.end()};
}
std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufType::Array || (v.elem_type != GgufType::F32 && v.elem_type != GgufType::F64))
    fail(ErrorKind::Corrupt, where_key(key), "expected an array of f32, found " + v.describe(0));
  std::vector<float> out(v.count);
  for (uint64_t k = 0; k < v.count; ++k) out[k] = static_cast<float>(array_elem_f(v, k));
  return out;
}
std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = get(key);
  bool ok = v.type == GgufType::Array && v.elem_type != GgufType::String && v.elem_type != GgufType::Array &&
            v.elem_type != GgufType::F32 && v.elem_type != GgufType::F64;
  if (!ok) fail(ErrorKind::Corrupt, where_key(key), "expected an array of integers, found " + v.describe(0));
  std::vector<int64_t> out(v.count);
  for (uint64_t k = 0; k < v.count; ++k)
    if (!array_elem_int(v, k, out[k])) fail(ErrorKind::Corrupt, where_key(key), "element " + std::to_string(k) + " does not fit i64");
  return out;
}

std::optional<uint32_t> GgufFile::opt_u32(const std::string& key) const { return has(key) ? std::optional(get_u32(key)) : std::nullopt; }
std::optional<uint64_t> GgufFile::opt_u64(const std::string& key) const { return has(key) ? std::optional(get_u64(key)) : std::nullopt; }
std::optional<float> GgufFile::opt_f32(const std::string& key) const { return has(key) ? std::optional(get_f32(key)) : std::nullopt; }
std::optional<bool> GgufFile::opt_bool(const std::string& key) const { return has(key) ? std::optional(get_bool(key)) : std::nullopt; }
std::optional<std::string> GgufFile::opt_string(const std::string& key) const { return has(key) ? std::optional(get_string(key)) : std::nullopt; }

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) fail(ErrorKind::InvalidArgument, path_ + ": tensor '" + name + "'", "no such tensor");
  return Tensor::view(t->dtype, t->shape, file_->data() + t->offset, file_);
}

}  // namespace ptn
