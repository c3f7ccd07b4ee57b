#include "formats/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/reader.h"

namespace ptn {

namespace {

using json = nlohmann::json;

// Element size of a safetensors dtype; 0 if unknown.
size_t st_dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4},
      {"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::string dir_join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace

bool looks_like_safetensors(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char b[9] = {};
  size_t n = std::fread(b, 1, 9, f);
  std::fclose(f);
  if (n != 9) return false;
  uint64_t len = 0;
  std::memcpy(&len, b, 8);
  return len >= 2 && len <= SafetensorsFile::kMaxHeader && b[8] == '{';
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto s = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  s->file_ = MappedFile::open(path);
  s->path_ = path;
  ByteReader r(s->file_->data(), s->file_->size(), path);
  uint64_t n = r.read<uint64_t>("header size");
  if (n > kMaxHeader) r.corrupt("header size", "header of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(kMaxHeader));
  std::string_view text = r.string(n, kMaxHeader, "header");
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = s->file_->size() - data_start;

  json h;
  try {
    h = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(ErrorKind::Corrupt, path + ": JSON header", std::string("malformed: ") + e.what());
  }
  if (!h.is_object()) fail(ErrorKind::Corrupt, path + ": JSON header", "not a JSON object");

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    const std::string w = path + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!e.is_object()) fail(ErrorKind::Corrupt, path + ": __metadata__", "not an object");
      for (auto m = e.begin(); m != e.end(); ++m)
        if (m.value().is_string()) s->metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    if (!e.is_object()) fail(ErrorKind::Corrupt, w, "entry is not an object");
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail(ErrorKind::Corrupt, w + " field 'dtype'", "missing or not a string");
    if (!e.contains("shape") || !e["shape"].is_array()) fail(ErrorKind::Corrupt, w + " field 'shape'", "missing or not an array");
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      fail(ErrorKind::Corrupt, w + " field 'data_offsets'", "missing or not a [begin, end] pair");
    SafetensorsInfo t;
    t.name = name;
    t.dtype = e["dtype"].get<std::string>();
    size_t esize = st_dtype_size(t.dtype);
    if (esize == 0) fail(ErrorKind::Unsupported, w + " field 'dtype'", "unknown dtype '" + t.dtype + "'");
    if (e["shape"].size() > static_cast<size_t>(kMaxDims)) fail(ErrorKind::Unsupported, w + " field 'shape'", "more than 4 dimensions");
    uint64_t numel = 1;
    for (const json& d : e["shape"]) {
      if (!d.is_number_unsigned()) fail(ErrorKind::Corrupt, w + " field 'shape'", "dimension " + d.dump() + " is not a non-negative integer");
      uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 48)) fail(ErrorKind::Corrupt, w + " field 'shape'", "dimension " + std::to_string(v) + " is too large");
      numel = checked_mul(numel, v, w + " field 'shape'");
      t.shape.push_back(static_cast<int64_t>(v));
    }
    uint64_t offs[2];
    for (int k = 0; k < 2; ++k) {
      const json& o = e["data_offsets"][k];
      if (!o.is_number_unsigned()) fail(ErrorKind::Corrupt, w + " field 'data_offsets'", "offset " + o.dump() + " is not a non-negative integer");
      offs[k] = o.get<uint64_t>();
    }
    if (offs[0] > offs[1] || offs[1] > data_size)
      fail(ErrorKind::Corrupt, w + " field 'data_offsets'",
           "[" + std::to_string(offs[0]) + ", " + std::to_string(offs[1]) + ") is not inside the data buffer of " + std::to_string(data_size) + " bytes");
    t.nbytes = offs[1] - offs[0];
    uint64_t expect = checked_mul(numel, esize, w + " size");
    if (t.nbytes != expect)
      fail(ErrorKind::Corrupt, w + " field 'data_offsets'",
           "holds " + std::to_string(t.nbytes) + " bytes but " + t.dtype + shape_str(t.shape) + " needs " + std::to_string(expect));
    t.offset = data_start + offs[0];
    s->index_[name] = s->tensors_.size();
    s->tensors_.push_back(std::move(t));
  }

  // Listed in file order; the entries must tile the data buffer exactly.
  std::sort(s->tensors_.begin(), s->tensors_.end(), [](const SafetensorsInfo& a, const SafetensorsInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  s->index_.clear();
  for (size_t i = 0; i < s->tensors_.size(); ++i) s->index_[s->tensors_[i].name] = i;
  uint64_t expect = data_start;
  for (const SafetensorsInfo* t = s->tensors_.data(); t != s->tensors_.data() + s->tensors_.size(); ++t) {
    if (t->offset != expect)
      fail(ErrorKind::Corrupt, path + ": tensor '" + t->name + "' field 'data_offsets'",
           t->offset < expect ? "overlaps the previous tensor" : "leaves a gap of " + std::to_string(t->offset - expect) + " bytes before it");
    expect = t->offset + t->nbytes;
  }
  if (expect != s->file_->size())
    fail(ErrorKind::Corrupt, path + ": data", "tensors cover " + std::to_string(expect - data_start) + " of the " + std::to_string(data_size) + " data bytes");
  return s;
}

const SafetensorsInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsInfo* t = find(name);
  if (!t) fail(ErrorKind::InvalidArgument, path_ + ": tensor '" + name + "'", "no such tensor");
  DType dt;
  if (t->dtype == "F32") dt = DType::F32;
  else if (t->dtype == "F16") dt = DType::F16;
  else if (t->dtype == "BF16") dt = DType::BF16;
  else fail(ErrorKind::Unsupported, path_ + ": tensor '" + name + "'", "dtype " + t->dtype + " is not supported (F32, F16, BF16 are)");
  return Tensor::view(dt, t->shape, file_->data() + t->offset, file_);
}

Tensor SafetensorsFile::u8_bytes(const std::string& name) const {
  const SafetensorsInfo* t = find(name);
  if (!t) fail(ErrorKind::InvalidArgument, path_ + ": tensor '" + name + "'", "no such tensor");
  if (t->dtype != "U8")
    fail(ErrorKind::Unsupported, path_ + ": tensor '" + name + "'", "dtype " + t->dtype + ", expected U8 (MXFP4 blocks or scales)");
  return Tensor::view(DType::I8, t->shape, file_->data() + t->offset, file_);
}

std::shared_ptr<SafetensorsSet> SafetensorsSet::open_file(const std::string& path) {
  auto s = std::make_shared<SafetensorsSet>();
  s->files_.push_back(SafetensorsFile::open(path));
  for (const auto& t : s->files_[0]->tensors()) s->where_[t.name] = 0;
  return s;
}

std::shared_ptr<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  const std::string index_path = dir_join(dir, "model.safetensors.index.json");
  if (!file_exists(index_path)) {
    const std::string single = dir_join(dir, "model.safetensors");
    if (!file_exists(single)) {
      if (file_exists(dir_join(dir, "pytorch_model.bin")) || file_exists(dir_join(dir, "pytorch_model.bin.index.json")))
        fail(ErrorKind::Unsupported, dir, "PyTorch pickle checkpoints (pytorch_model.bin) are not read; convert them to safetensors");
      fail(ErrorKind::Io, dir, "no model.safetensors or model.safetensors.index.json");
    }
    return open_file(single);
  }
  json idx;
  try {
    idx = json::parse(read_text_file(index_path, 64u << 20));
  } catch (const json::exception& e) {
    fail(ErrorKind::Corrupt, index_path, std::string("malformed JSON: ") + e.what());
  }
  if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    fail(ErrorKind::Corrupt, index_path + ": field 'weight_map'", "missing or not an object");
  auto s = std::make_shared<SafetensorsSet>();
  std::map<std::string, size_t> shard_index;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    const std::string w = index_path + ": weight_map['" + it.key() + "']";
    if (!it.value().is_string()) fail(ErrorKind::Corrupt, w, "not a file name string");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos || shard == "." || shard == "..")
      fail(ErrorKind::Corrupt, w, "shard name '" + shard + "' is not a plain file name in the directory");
    auto found = shard_index.find(shard);
    if (found == shard_index.end()) {
      const std::string p = dir_join(dir, shard);
      if (!file_exists(p)) fail(ErrorKind::Corrupt, w, "shard file '" + shard + "' does not exist");
      found = shard_index.emplace(shard, s->files_.size()).first;
      s->files_.push_back(SafetensorsFile::open(p));
    }
    if (!s->files_[found->second]->find(it.key()))
      fail(ErrorKind::Corrupt, w, "tensor is not in shard '" + shard + "'");
    s->where_[it.key()] = found->second;
  }
  return s;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : where_) out.push_back(n);
  return out;
}

const SafetensorsInfo* SafetensorsSet::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->find(name);
}

Tensor SafetensorsSet::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(ErrorKind::InvalidArgument, "safetensors: tensor '" + name + "'", "no such tensor");
  return files_[it->second]->tensor(name);
}

Tensor SafetensorsSet::u8_bytes(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(ErrorKind::InvalidArgument, "safetensors: tensor '" + name + "'", "no such tensor");
  return files_[it->second]->u8_bytes(name);
}

std::string SafetensorsSet::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? "" : files_[it->second]->path();
}

}  // namespace ptn

namespace ptn {

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const auto& e : entries) {
    const char* dt = e.dtype == DType::F32 ? "F32" : e.dtype == DType::BF16 ? "BF16" : e.dtype == DType::F16 ? "F16" : nullptr;
    if (!dt) fail(ErrorKind::InvalidArgument, path + ": tensor '" + e.name + "'", std::string("cannot write dtype ") + dtype_name(e.dtype) + " to safetensors");
    uint64_t n = traits(e.dtype).block_bytes;
    for (int64_t d : e.shape) n = checked_mul(n, static_cast<uint64_t>(d), path + ": tensor '" + e.name + "'");
    h[e.name] = {{"dtype", dt}, {"shape", e.shape}, {"data_offsets", {offset, offset + n}}};
    sizes.push_back(n);
    offset += n;
  }
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  FileWriter f(path);
  const uint64_t hn = header.size();
  f.write(&hn, 8);
  f.write(header.data(), header.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    Tensor t = entries[i].produce();
    if (t.dtype() != entries[i].dtype || t.shape() != entries[i].shape)
      fail(ErrorKind::Internal, path + ": tensor '" + entries[i].name + "'", "produced " + t.describe());
    if (!t.contiguous()) t = t.copy();
    f.write(t.data(), sizes[i]);
  }
  f.commit();
}

}  // namespace ptn
