#include "core/tensor.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace ptn {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

static void validate_shape(DType dtype, const std::vector<int64_t>& shape) {
  if (shape.size() > static_cast<size_t>(kMaxDims))
    fail(ErrorKind::InvalidArgument, "tensor", "more than 4 dimensions: " + shape_str(shape));
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(ErrorKind::InvalidArgument, "tensor", "negative dimension in " + shape_str(shape));
    n = checked_mul(n, static_cast<uint64_t>(d), "tensor shape " + shape_str(shape));
  }
  // numel() is an int64_t and nbytes() a size_t: both must be representable.
  if (n > static_cast<uint64_t>(INT64_MAX))
    fail(ErrorKind::InvalidArgument, "tensor", "too many elements in " + shape_str(shape));
  if (!shape.empty()) {
    uint64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows = checked_mul(rows, static_cast<uint64_t>(shape[i]), "tensor shape " + shape_str(shape));
    checked_mul(rows, row_bytes(dtype, shape.back(), "tensor " + shape_str(shape)), "tensor bytes " + shape_str(shape));
  }
}

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  if (bytes > SIZE_MAX - 63) throw std::bad_alloc();  // rounding up would wrap to a tiny buffer
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

void Tensor::init_strides() {
  strides_.assign(shape_.size(), 0);
  if (shape_.empty()) return;
  int64_t s = static_cast<int64_t>(row_bytes());
  strides_.back() = static_cast<int64_t>(traits(dtype_).block_bytes) / traits(dtype_).block_size;
  for (int i = static_cast<int>(shape_.size()) - 2; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  validate_shape(dtype, shape);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.init_strides();
  auto buf = aligned_buffer(t.nbytes());
  t.data_ = buf.get();
  t.owner_ = std::move(buf);
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, const void* data,
                    std::shared_ptr<const void> keep_alive) {
  validate_shape(dtype, shape);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.init_strides();
  t.data_ = const_cast<void*>(data);
  t.owner_ = std::move(keep_alive);
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? n + i : i;
  if (j < 0 || j >= n)
    fail(ErrorKind::InvalidArgument, "tensor", "dimension " + std::to_string(i) + " of " + describe());
  return shape_[j];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t Tensor::rows() const {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape_.size(); ++i) n *= shape_[i];
  return n;
}

size_t Tensor::row_bytes() const { return ptn::row_bytes(dtype_, row_size()); }

size_t Tensor::nbytes() const { return row_bytes() * static_cast<size_t>(rows()); }

bool Tensor::contiguous() const {
  Tensor probe;
  probe.dtype_ = dtype_;
  probe.shape_ = shape_;
  probe.init_strides();
  return probe.strides_ == strides_;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0])
    fail(ErrorKind::InvalidArgument, "tensor slice",
         "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " + describe());
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<uint8_t*>(data_) + begin * (shape_.size() == 1 ? 0 : strides_[0]);
  if (shape_.size() == 1) {
    size_t eb = traits(dtype_).block_bytes;
    if (traits(dtype_).block_size != 1)
      fail(ErrorKind::InvalidArgument, "tensor slice", "cannot slice inside a quantized row");
    t.data_ = static_cast<uint8_t*>(data_) + begin * static_cast<int64_t>(eb);
  }
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  if (!contiguous()) fail(ErrorKind::InvalidArgument, "tensor reshape", "not contiguous: " + describe());
  Tensor t = view(dtype_, std::move(shape), data_, owner_);
  if (t.numel() != numel())
    fail(ErrorKind::InvalidArgument, "tensor reshape", describe() + " to " + t.describe());
  return t;
}

Tensor Tensor::copy() const {
  Tensor t = zeros(dtype_, shape_);
  if (contiguous()) {
    std::memcpy(t.data_, data_, nbytes());
  } else {
    fail(ErrorKind::InvalidArgument, "tensor copy", "not contiguous: " + describe());
  }
  return t;
}

std::string Tensor::describe() const { return std::string(dtype_name(dtype_)) + shape_str(shape_); }

void check_shape(const char* op, const Tensor& t, const std::vector<int64_t>& expected) {
  bool ok = t.ndim() == static_cast<int>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i)
    ok = expected[i] < 0 || expected[i] == t.shape()[i];
  if (!ok)
    fail(ErrorKind::InvalidArgument, op,
         "expected shape " + shape_str(expected) + ", got " + t.describe());
}

}  // namespace ptn
