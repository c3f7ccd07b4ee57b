// A tensor: dtype, shape (outermost first, as PyTorch writes it), byte strides, and data that
// is either owned (heap, 64-byte aligned) or a view of bytes owned elsewhere (an mmap'ed file,
// an arena). Quantized tensors keep their innermost dimension contiguous: rows are whole blocks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ptn {

constexpr int kMaxDims = 4;

class Tensor {
 public:
  Tensor() = default;
  // Owning, zero-initialised, contiguous.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  // Non-owning contiguous view of `data`; `keep_alive` (may be null) keeps its owner alive.
  static Tensor view(DType dtype, std::vector<int64_t> shape, const void* data,
                     std::shared_ptr<const void> keep_alive = nullptr);

  DType dtype() const { return dtype_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const;         // negative i counts from the end
  int64_t numel() const;
  int64_t rows() const;             // product of all but the innermost dimension
  int64_t row_size() const { return shape_.empty() ? 1 : shape_.back(); }
  size_t row_bytes() const;         // bytes of one innermost row
  size_t nbytes() const;            // bytes of the whole (contiguous) tensor
  const std::vector<int64_t>& strides() const { return strides_; }  // in bytes
  bool contiguous() const;
  bool empty() const { return data_ == nullptr; }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <class T> T* data_as() { return static_cast<T*>(data_); }
  template <class T> const T* data_as() const { return static_cast<const T*>(data_); }
  // Pointer to row r (r indexes the flattened outer dimensions of a contiguous tensor).
  const uint8_t* row_ptr(int64_t r) const { return static_cast<const uint8_t*>(data_) + r * row_bytes(); }
  uint8_t* row_ptr(int64_t r) { return static_cast<uint8_t*>(data_) + r * row_bytes(); }

  // Rows [begin, end) of the outermost dimension as a view sharing this tensor's storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Same bytes, new shape (same number of elements; contiguous only).
  Tensor reshaped(std::vector<int64_t> shape) const;
  // An owning deep copy (a copy is always explicit).
  Tensor copy() const;

  std::string describe() const;  // "f32[2, 64]"

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  void init_strides();
};

// Shape checks for ops: throw InvalidArgument naming the op and the shapes.
void check_shape(const char* op, const Tensor& t, const std::vector<int64_t>& expected);
std::string shape_str(const std::vector<int64_t>& shape);

// 64-byte aligned heap buffer of `bytes` bytes, zeroed; freed with the returned shared_ptr.
std::shared_ptr<void> aligned_buffer(size_t bytes);

}  // namespace ptn
