#include "formats/ptn_file.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/file.h"
#include "core/reader.h"

static_assert(std::endian::native == std::endian::little, "the .ptn code reads little-endian fields in place");

namespace ptn {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Header layout (little-endian; see docs/ptn-format.md)

namespace {

constexpr uint8_t kMagic[8] = {'P', 'T', 'N', 0, 'P', 'R', 'O', 'G'};

// Byte offsets of the header fields.
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffFlags = 12;
constexpr size_t kOffFileSize = 16;
constexpr size_t kOffManifestOffset = 24;
constexpr size_t kOffManifestSize = 32;
constexpr size_t kOffManifestCrc = 40;
constexpr size_t kOffReserved0 = 44;  // u32, zero
constexpr size_t kOffDataOffset = 48;
constexpr size_t kOffDataSize = 56;
constexpr size_t kOffReserved = 64;   // 60 zero bytes, room for flag-guarded fields
constexpr size_t kOffHeaderCrc = 124; // CRC32C of bytes [0, 124)

// Flags: the low 16 bits mark additions an older reader may ignore, the high 16 bits additions
// it must understand to read the file. Version 1 defines none.
constexpr uint32_t kKnownFlags = 0;
constexpr uint32_t kRequiredFlagMask = 0xffff0000u;

template <class T>
void put(uint8_t* h, size_t off, T v) {
  std::memcpy(h + off, &v, sizeof v);  // the host is little-endian (x86-64, aarch64)
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Validates UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool valid_utf8(const std::string& s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return false;
    if (n - i < static_cast<size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// Why a tensor name is unacceptable, or "" if it is fine. Shared by writer and reader.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "tensor name is empty";
  if (name.size() > PtnLimits::kMaxNameBytes)
    return "tensor name is " + std::to_string(name.size()) + " bytes, more than the limit of " +
           std::to_string(PtnLimits::kMaxNameBytes);
  for (char c : name)
    if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) return "tensor name contains a control character";
  if (!valid_utf8(name)) return "tensor name is not valid UTF-8";
  return "";
}

// Bytes a tensor of this dtype and shape occupies; checks dims, block multiple and overflow.
// Errors are `kind` naming `where`.
uint64_t expected_nbytes(DType dtype, const std::vector<int64_t>& shape, ErrorKind kind,
                         const std::string& where) {
  const DTypeTraits& tr = traits(dtype);
  if (shape.size() > static_cast<size_t>(kMaxDims))
    fail(kind, where, "shape " + shape_str(shape) + " has more than " + std::to_string(kMaxDims) + " dimensions");
  for (int64_t d : shape)
    if (d < 0) fail(kind, where, "shape " + shape_str(shape) + " has a negative dimension");
  const int64_t last = shape.empty() ? 1 : shape.back();
  if (last % tr.block_size != 0)
    fail(kind, where,
         "innermost dimension " + std::to_string(last) + " is not a multiple of the " + tr.name +
             " block size " + std::to_string(tr.block_size));
  // Tensor computes rows and element counts in int64_t, so both must fit there.
  int64_t rows = 1, numel;
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    if (__builtin_mul_overflow(rows, shape[i], &rows))
      fail(kind, where, "shape " + shape_str(shape) + " overflows 64-bit sizes");
  if (__builtin_mul_overflow(rows, last, &numel))
    fail(kind, where, "shape " + shape_str(shape) + " overflows 64-bit sizes");
  uint64_t row, total;
  if (__builtin_mul_overflow(static_cast<uint64_t>(last / tr.block_size), tr.block_bytes, &row) ||
      __builtin_mul_overflow(row, static_cast<uint64_t>(rows), &total))
    fail(kind, where, "shape " + shape_str(shape) + " overflows 64-bit sizes");
  return total;
}

// Depth of a JSON value, stopping once it exceeds `limit` (so the recursion is bounded).
int json_depth(const json& j, int limit) {
  if (!j.is_structured()) return 0;
  int d = 0;
  for (const auto& v : j) {
    d = std::max(d, json_depth(v, limit));
    if (d > limit) break;
  }
  return d + 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

PtnWriter::PtnWriter(const std::string& path, uint64_t alignment)
    : path_(path), tmp_(path + ".tmp"), alignment_(alignment) {
  if (!is_power_of_two(alignment) || alignment < PtnLimits::kMinAlignment || alignment > PtnLimits::kMaxAlignment)
    fail(ErrorKind::InvalidArgument, path, "tensor alignment " + std::to_string(alignment) +
         " is not a power of two in [" + std::to_string(PtnLimits::kMinAlignment) + ", " +
         std::to_string(PtnLimits::kMaxAlignment) + "]");
  data_offset_ = std::max<uint64_t>(PtnLimits::kDataSegmentAlignment, alignment);
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail(ErrorKind::Io, tmp_, std::string("cannot create: ") + std::strerror(errno));
  try {
    // Header placeholder (written by finish) and zero padding up to the data segment.
    static const uint8_t zeros[4096] = {};
    while (pos_ < data_offset_) write(zeros, static_cast<size_t>(std::min<uint64_t>(sizeof zeros, data_offset_ - pos_)));
  } catch (...) {
    abandon();
    throw;
  }
}

PtnWriter::~PtnWriter() { abandon(); }

void PtnWriter::abandon() noexcept {
  if (f_) {
    std::fclose(f_);
    f_ = nullptr;
    std::remove(tmp_.c_str());
  }
}

void PtnWriter::check_usable(const char* what) const {
  if (finished_) fail(ErrorKind::InvalidArgument, path_, std::string(what) + " after finish()");
  if (failed_ || !f_) fail(ErrorKind::InvalidArgument, path_, std::string(what) + " after an earlier write failed");
}

void PtnWriter::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, f_) != n) {
    failed_ = true;
    int e = errno;
    abandon();
    fail(ErrorKind::Io, tmp_, std::string("write failed: ") + std::strerror(e));
  }
  pos_ += n;
}

void PtnWriter::pad_to(uint64_t alignment) {
  static const uint8_t zeros[4096] = {};
  const uint64_t target = align_up(pos_, alignment);
  while (pos_ < target) write(zeros, static_cast<size_t>(std::min<uint64_t>(sizeof zeros, target - pos_)));
}

void PtnWriter::add_tensor(const std::string& name, const Tensor& t) {
  if (!t.contiguous())
    fail(ErrorKind::InvalidArgument, path_, "tensor '" + name + "' is not contiguous: " + t.describe());
  add_tensor(name, t.dtype(), t.shape(), t.data(), t.nbytes());
}

void PtnWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                           size_t nbytes) {
  check_usable("add_tensor");
  const std::string where = path_ + ": tensor '" + name + "'";
  if (std::string p = name_problem(name); !p.empty()) fail(ErrorKind::InvalidArgument, where, p);
  if (names_.count(name)) fail(ErrorKind::InvalidArgument, where, "a tensor with this name was already added");
  if (tensors_.size() >= PtnLimits::kMaxTensors)
    fail(ErrorKind::Capacity, where, "more than " + std::to_string(PtnLimits::kMaxTensors) + " tensors");
  if (!dtype_traits(static_cast<uint32_t>(dtype)))
    fail(ErrorKind::InvalidArgument, where, "unknown dtype id " + std::to_string(static_cast<uint32_t>(dtype)));
  const uint64_t want = expected_nbytes(dtype, shape, ErrorKind::InvalidArgument, where);
  if (want != nbytes)
    fail(ErrorKind::InvalidArgument, where,
         std::string(dtype_name(dtype)) + shape_str(shape) + " needs " + std::to_string(want) + " bytes, got " +
             std::to_string(nbytes));
  if (nbytes && !data) fail(ErrorKind::InvalidArgument, where, "data is null");

  pad_to(alignment_);
  PtnTensorInfo info;
  info.name = name;
  info.dtype = dtype;
  info.shape = std::move(shape);
  info.offset = pos_ - data_offset_;
  info.nbytes = nbytes;
  info.crc32c = crc32c(data, nbytes);
  write(data, nbytes);
  names_.insert(name);
  tensors_.push_back(std::move(info));
}

void PtnWriter::finish(const json& manifest) {
  check_usable("finish");
  if (!manifest.is_object())
    fail(ErrorKind::InvalidArgument, path_, std::string("manifest must be a JSON object, got ") + manifest.type_name());
  for (const char* key : {kPtnTensorsKey, kPtnAlignmentKey})
    if (manifest.contains(key))
      fail(ErrorKind::InvalidArgument, path_, std::string("manifest key '") + key + "' is reserved for the container");
  if (json_depth(manifest, PtnLimits::kMaxJsonDepth - 1) > PtnLimits::kMaxJsonDepth - 1)
    fail(ErrorKind::InvalidArgument, path_,
         "manifest nests deeper than " + std::to_string(PtnLimits::kMaxJsonDepth - 1) + " levels");

  json raw = manifest;
  raw[kPtnAlignmentKey] = alignment_;
  json table = json::array();
  for (const PtnTensorInfo& t : tensors_)
    table.push_back({{"name", t.name},
                     {"dtype", dtype_name(t.dtype)},
                     {"shape", t.shape},
                     {"offset", t.offset},
                     {"nbytes", t.nbytes},
                     {"crc32c", t.crc32c}});
  raw[kPtnTensorsKey] = std::move(table);
  std::string text;
  try {
    text = raw.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a caller's string
    fail(ErrorKind::InvalidArgument, path_, std::string("manifest cannot be serialised: ") + e.what());
  }
  if (text.size() > PtnLimits::kMaxManifestBytes)
    fail(ErrorKind::Capacity, path_,
         "manifest is " + std::to_string(text.size()) + " bytes, more than the limit of " +
             std::to_string(PtnLimits::kMaxManifestBytes));

  const uint64_t data_size = pos_ - data_offset_;
  const uint64_t manifest_offset = pos_;
  write(text.data(), text.size());
  const uint64_t file_size = pos_;

  uint8_t h[PtnLimits::kHeaderSize] = {};
  std::memcpy(h + kOffMagic, kMagic, sizeof kMagic);
  put<uint32_t>(h, kOffVersion, PtnLimits::kFormatVersion);
  put<uint32_t>(h, kOffFlags, 0);
  put<uint64_t>(h, kOffFileSize, file_size);
  put<uint64_t>(h, kOffManifestOffset, manifest_offset);
  put<uint64_t>(h, kOffManifestSize, text.size());
  put<uint32_t>(h, kOffManifestCrc, crc32c(text.data(), text.size()));
  put<uint64_t>(h, kOffDataOffset, data_offset_);
  put<uint64_t>(h, kOffDataSize, data_size);
  put<uint32_t>(h, kOffHeaderCrc, crc32c(h, kOffHeaderCrc));

  auto io_fail = [&](const char* what) {
    int e = errno;
    failed_ = true;
    abandon();
    fail(ErrorKind::Io, tmp_, std::string(what) + ": " + std::strerror(e));
  };
  if (fseeko(f_, 0, SEEK_SET) != 0) io_fail("cannot seek to the header");
  if (std::fwrite(h, 1, sizeof h, f_) != sizeof h) io_fail("header write failed");
  if (std::fflush(f_) != 0) io_fail("flush failed");
  if (fsync(fileno(f_)) != 0) io_fail("fsync failed");
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) {
    int e = errno;
    failed_ = true;
    std::remove(tmp_.c_str());
    fail(ErrorKind::Io, tmp_, std::string("close failed: ") + std::strerror(e));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    failed_ = true;
    std::remove(tmp_.c_str());
    fail(ErrorKind::Io, path_, std::string("cannot rename into place: ") + std::strerror(e));
  }
  finished_ = true;
}

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

// Page-aligned copy of bytes given in memory, so tensor views are as aligned as in a mapping.
std::shared_ptr<const void> aligned_copy(const std::vector<uint8_t>& bytes) {
  const size_t rounded = align_up(std::max<size_t>(bytes.size(), 1), 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (!p) throw std::bad_alloc();
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
  return std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

std::shared_ptr<PtnFile> PtnFile::open(const std::string& path, VerifyLevel level) {
  std::shared_ptr<MappedFile> mf = MappedFile::open(path);
  const uint8_t* data = mf->data();
  const uint64_t size = mf->size();
  return load(std::move(mf), data, size, path, level);
}

std::shared_ptr<PtnFile> PtnFile::from_memory(std::vector<uint8_t> bytes, const std::string& name,
                                              VerifyLevel level) {
  std::shared_ptr<const void> buf = aligned_copy(bytes);
  const uint8_t* data = static_cast<const uint8_t*>(buf.get());
  const uint64_t size = bytes.size();
  bytes = {};
  return load(std::move(buf), data, size, name, level);
}

std::shared_ptr<PtnFile> PtnFile::load(std::shared_ptr<const void> storage, const uint8_t* data, uint64_t size,
                                       const std::string& name, VerifyLevel level) {
  std::shared_ptr<PtnFile> f(new PtnFile());
  f->storage_ = std::move(storage);
  f->data_ = data;
  f->size_ = size;
  f->name_ = name;
  f->parse_header();
  f->parse_manifest();
  if (level == VerifyLevel::Full) f->verify_checksums();
  return f;
}

void PtnFile::parse_header() {
  const std::string hdr = name_ + ": header";
  auto field = [&](const char* f) { return hdr + " field '" + f + "'"; };

  // The magic first, so that any other file type is named as such, truncated or not.
  if (size_ == 0) fail(ErrorKind::Corrupt, name_, "not a .ptn file: the file is empty");
  const size_t have = static_cast<size_t>(std::min<uint64_t>(size_, sizeof kMagic));
  if (std::memcmp(data_, kMagic, have) != 0) {
    // Other model files are named as what they are, not as a damaged program.
    if (size_ >= 4 && std::memcmp(data_, "GGUF", 4) == 0)
      fail(ErrorKind::InvalidArgument, name_,
           "a GGUF file, not a .ptn program: `ptn run`, `chat`, `serve`, `perplexity` and `verify` take it as it "
           "is; `ptn export -m FILE -o OUT.ptn` makes a program of it");
    if (size_ >= 1 && data_[0] == '{')
      fail(ErrorKind::InvalidArgument, name_,
           "a JSON file, not a .ptn program (for an HF model give its directory, config.json with safetensors)");
    fail(ErrorKind::Corrupt, name_, "not a .ptn file: wrong magic bytes (expected \"PTN\\0PROG\")");
  }
  if (size_ < PtnLimits::kHeaderSize)
    fail(ErrorKind::Corrupt, hdr,
         "truncated: the file is " + std::to_string(size_) + " bytes, the header alone needs " +
             std::to_string(PtnLimits::kHeaderSize));

  ByteReader r(data_, static_cast<size_t>(PtnLimits::kHeaderSize), hdr);
  r.skip(sizeof kMagic, "magic");
  format_version_ = r.read<uint32_t>("format_version");
  flags_ = r.read<uint32_t>("flags");
  const uint64_t file_size = r.read<uint64_t>("file_size");
  manifest_offset_ = r.read<uint64_t>("manifest_offset");
  manifest_size_ = r.read<uint64_t>("manifest_size");
  manifest_crc_ = r.read<uint32_t>("manifest_crc32c");
  const uint32_t reserved0 = r.read<uint32_t>("reserved");
  data_offset_ = r.read<uint64_t>("data_offset");
  data_size_ = r.read<uint64_t>("data_size");
  const uint8_t* reserved = r.bytes(kOffHeaderCrc - kOffReserved, "reserved");
  const uint32_t header_crc = r.read<uint32_t>("header_crc32c");

  // The 128-byte frame (magic, version, flags, header CRC at byte 124) is the same in every
  // format version, so the CRC is checked first and a version number read after it is real.
  const uint32_t actual_crc = crc32c(data_, kOffHeaderCrc);
  if (actual_crc != header_crc)
    fail(ErrorKind::Corrupt, field("header_crc32c"),
         "checksum mismatch: stored " + hex32(header_crc) + ", computed " + hex32(actual_crc) +
             " (the header is damaged)");
  if (format_version_ == 0) fail(ErrorKind::Corrupt, field("format_version"), "version 0 does not exist");
  if (format_version_ > PtnLimits::kFormatVersion)
    fail(ErrorKind::Unsupported, field("format_version"),
         "the file has format version " + std::to_string(format_version_) + ", newer than version " +
             std::to_string(PtnLimits::kFormatVersion) + " which this ptn reads; upgrade ptn to load it");
  const uint32_t unknown = flags_ & ~kKnownFlags;
  if (unknown & kRequiredFlagMask)
    fail(ErrorKind::Unsupported, field("flags"),
         "the file uses features this ptn does not know (required flag bits " + hex32(unknown & kRequiredFlagMask) +
             "); upgrade ptn to load it");
  if (unknown == 0) {  // without flags, the reserved bytes are zero
    bool zero = reserved0 == 0;
    for (size_t i = 0; zero && i < kOffHeaderCrc - kOffReserved; ++i) zero = reserved[i] == 0;
    if (!zero) fail(ErrorKind::Corrupt, field("reserved"), "reserved header bytes are not zero");
  }

  if (file_size != size_)
    fail(ErrorKind::Corrupt, field("file_size"),
         size_ < file_size ? "truncated: the header says " + std::to_string(file_size) + " bytes, the file has " +
                                 std::to_string(size_)
                           : "the file has " + std::to_string(size_) + " bytes but the header says " +
                                 std::to_string(file_size) + " (trailing data)");

  if (data_offset_ < PtnLimits::kHeaderSize || data_offset_ % PtnLimits::kDataSegmentAlignment != 0)
    fail(ErrorKind::Corrupt, field("data_offset"),
         "data segment offset " + std::to_string(data_offset_) + " is not a multiple of " +
             std::to_string(PtnLimits::kDataSegmentAlignment) + " after the header");
  const uint64_t data_end = checked_add(data_offset_, data_size_, field("data_size"));
  if (data_end > size_)
    fail(ErrorKind::Corrupt, field("data_size"),
         "data segment [" + std::to_string(data_offset_) + ", " + std::to_string(data_end) +
             ") extends past the end of the file (" + std::to_string(size_) + " bytes)");
  if (manifest_size_ == 0) fail(ErrorKind::Corrupt, field("manifest_size"), "the manifest is empty");
  if (manifest_size_ > PtnLimits::kMaxManifestBytes)
    fail(ErrorKind::Corrupt, field("manifest_size"),
         "manifest of " + std::to_string(manifest_size_) + " bytes exceeds the limit of " +
             std::to_string(PtnLimits::kMaxManifestBytes));
  const uint64_t manifest_end = checked_add(manifest_offset_, manifest_size_, field("manifest_size"));
  if (manifest_offset_ < data_end)
    fail(ErrorKind::Corrupt, field("manifest_offset"),
         "manifest at " + std::to_string(manifest_offset_) + " overlaps the header or the data segment (which ends at " +
             std::to_string(data_end) + ")");
  if (manifest_end > size_)
    fail(ErrorKind::Corrupt, field("manifest_size"),
         "manifest [" + std::to_string(manifest_offset_) + ", " + std::to_string(manifest_end) +
             ") extends past the end of the file (" + std::to_string(size_) + " bytes)");
  // In version 1 the manifest ends the file; only an unknown compatible feature may add bytes
  // after it (they are then that feature's business).
  if (manifest_end < size_ && (flags_ & ~kKnownFlags) == 0)
    fail(ErrorKind::Corrupt, field("manifest_size"),
         "the manifest ends at " + std::to_string(manifest_end) + " but the file has " + std::to_string(size_) +
             " bytes; in format version 1 the manifest ends the file");
}

void PtnFile::parse_manifest() {
  const std::string where = name_ + ": manifest";
  const char* text = reinterpret_cast<const char*>(data_ + manifest_offset_);
  const uint32_t crc = crc32c(text, static_cast<size_t>(manifest_size_));
  if (crc != manifest_crc_)
    fail(ErrorKind::Corrupt, name_ + ": header field 'manifest_crc32c'",
         "manifest checksum mismatch: stored " + hex32(manifest_crc_) + ", computed " + hex32(crc) +
             " (the manifest is damaged)");

  // nlohmann's parser stops at a NUL byte as if the input ended there; refuse it outright.
  if (const void* nul = std::memchr(text, 0, static_cast<size_t>(manifest_size_)))
    fail(ErrorKind::Corrupt,
         where + " at byte " + std::to_string(static_cast<const char*>(nul) - text) + " (file offset " +
             std::to_string(manifest_offset_ + (static_cast<const char*>(nul) - text)) + ")",
         "malformed JSON: a NUL byte");

  // Depth-limited parse: nlohmann's value copies and dumps recurse, so deep nesting is refused.
  auto limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > PtnLimits::kMaxJsonDepth)
      fail(ErrorKind::Corrupt, where, "JSON nests deeper than " + std::to_string(PtnLimits::kMaxJsonDepth) + " levels");
    return true;
  };
  try {
    raw_manifest_ = json::parse(text, text + manifest_size_, limit_depth);
  } catch (const json::parse_error& e) {
    // e.byte counts the bytes read, so the offending byte is at 0-based offset e.byte - 1.
    const uint64_t at = e.byte ? e.byte - 1 : 0;
    fail(ErrorKind::Corrupt,
         where + " at byte " + std::to_string(at) + " (file offset " + std::to_string(manifest_offset_ + at) + ")",
         std::string("malformed JSON: ") + e.what());
  } catch (const json::exception& e) {
    fail(ErrorKind::Corrupt, where, std::string("malformed JSON: ") + e.what());
  }
  if (!raw_manifest_.is_object())
    fail(ErrorKind::Corrupt, where, std::string("must be a JSON object, got ") + raw_manifest_.type_name());

  // alignment
  auto it = raw_manifest_.find(kPtnAlignmentKey);
  const std::string aw = where + " field 'alignment'";
  if (it == raw_manifest_.end()) fail(ErrorKind::Corrupt, aw, "missing");
  if (!it->is_number_unsigned()) fail(ErrorKind::Corrupt, aw, "must be a non-negative integer, got " + it->dump());
  alignment_ = it->get<uint64_t>();
  if (!is_power_of_two(alignment_) || alignment_ < PtnLimits::kMinAlignment || alignment_ > PtnLimits::kMaxAlignment)
    fail(ErrorKind::Corrupt, aw,
         std::to_string(alignment_) + " is not a power of two in [" + std::to_string(PtnLimits::kMinAlignment) +
             ", " + std::to_string(PtnLimits::kMaxAlignment) + "]");
  if (data_offset_ % alignment_ != 0)
    fail(ErrorKind::Corrupt, name_ + ": header field 'data_offset'",
         "data segment offset " + std::to_string(data_offset_) + " is not a multiple of the tensor alignment " +
             std::to_string(alignment_));

  // tensors
  it = raw_manifest_.find(kPtnTensorsKey);
  if (it == raw_manifest_.end()) fail(ErrorKind::Corrupt, where + " field 'tensors'", "missing");
  parse_tensor_table(*it);

  manifest_ = raw_manifest_;
  manifest_.erase(kPtnTensorsKey);
  manifest_.erase(kPtnAlignmentKey);
}

void PtnFile::parse_tensor_table(const json& table) {
  const std::string tw = name_ + ": manifest field 'tensors'";
  if (!table.is_array()) fail(ErrorKind::Corrupt, tw, std::string("must be an array, got ") + table.type_name());
  if (table.size() > PtnLimits::kMaxTensors)
    fail(ErrorKind::Corrupt, tw,
         std::to_string(table.size()) + " tensors exceed the limit of " + std::to_string(PtnLimits::kMaxTensors));

  tensors_.reserve(table.size());
  by_name_.reserve(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    const json& e = table[i];
    std::string entry = name_ + ": manifest tensors[" + std::to_string(i) + "]";
    if (!e.is_object()) fail(ErrorKind::Corrupt, entry, std::string("must be an object, got ") + e.type_name());
    auto get = [&](const char* key) -> const json& {
      auto f = e.find(key);
      if (f == e.end()) fail(ErrorKind::Corrupt, entry + " field '" + key + "'", "missing");
      return *f;
    };
    auto get_u64 = [&](const char* key, uint64_t max) {
      const json& v = get(key);
      const std::string fw = entry + " field '" + key + "'";
      if (!v.is_number_integer()) fail(ErrorKind::Corrupt, fw, "must be an integer, got " + v.dump());
      if (!v.is_number_unsigned()) fail(ErrorKind::Corrupt, fw, "must not be negative, got " + v.dump());
      uint64_t x = v.get<uint64_t>();
      if (x > max) fail(ErrorKind::Corrupt, fw, std::to_string(x) + " exceeds " + std::to_string(max));
      return x;
    };

    PtnTensorInfo t;
    const json& jn = get("name");
    if (!jn.is_string()) fail(ErrorKind::Corrupt, entry + " field 'name'", "must be a string, got " + jn.dump());
    t.name = jn.get<std::string>();
    if (std::string p = name_problem(t.name); !p.empty()) fail(ErrorKind::Corrupt, entry + " field 'name'", p);
    entry += " ('" + t.name + "')";
    auto fw = [&](const char* key) { return entry + " field '" + key + "'"; };
    if (by_name_.count(t.name))
      fail(ErrorKind::Corrupt, fw("name"),
           "duplicate tensor name (also tensors[" + std::to_string(by_name_[t.name]) + "])");

    const json& jd = get("dtype");
    if (!jd.is_string()) fail(ErrorKind::Corrupt, fw("dtype"), "must be a string, got " + jd.dump());
    auto dt = dtype_from_name(jd.get<std::string>());
    if (!dt) fail(ErrorKind::Unsupported, fw("dtype"), "unknown dtype " + jd.dump());
    t.dtype = *dt;

    const json& js = get("shape");
    if (!js.is_array()) fail(ErrorKind::Corrupt, fw("shape"), "must be an array, got " + js.dump());
    if (js.size() > static_cast<size_t>(kMaxDims))
      fail(ErrorKind::Corrupt, fw("shape"),
           std::to_string(js.size()) + " dimensions, more than " + std::to_string(kMaxDims));
    for (const json& d : js) {
      if (!d.is_number_integer()) fail(ErrorKind::Corrupt, fw("shape"), "dimensions must be integers, got " + d.dump());
      if (!d.is_number_unsigned()) fail(ErrorKind::Corrupt, fw("shape"), "negative dimension " + d.dump());
      uint64_t x = d.get<uint64_t>();
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(ErrorKind::Corrupt, fw("shape"), "dimension " + d.dump() + " is too large");
      t.shape.push_back(static_cast<int64_t>(x));
    }

    t.offset = get_u64("offset", std::numeric_limits<uint64_t>::max());
    t.nbytes = get_u64("nbytes", std::numeric_limits<uint64_t>::max());
    t.crc32c = static_cast<uint32_t>(get_u64("crc32c", 0xffffffffu));

    const uint64_t want = expected_nbytes(t.dtype, t.shape, ErrorKind::Corrupt, fw("shape"));
    if (want != t.nbytes)
      fail(ErrorKind::Corrupt, fw("nbytes"),
           std::to_string(t.nbytes) + " bytes, but " + dtype_name(t.dtype) + shape_str(t.shape) + " needs " +
               std::to_string(want));
    if (t.offset % alignment_ != 0)
      fail(ErrorKind::Corrupt, fw("offset"),
           std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment_));
    const uint64_t end = checked_add(t.offset, t.nbytes, fw("offset"));
    if (end > data_size_)
      fail(ErrorKind::Corrupt, fw("offset"),
           "bytes [" + std::to_string(t.offset) + ", " + std::to_string(end) +
               ") lie outside the data segment of " + std::to_string(data_size_) + " bytes");

    by_name_.emplace(t.name, i);
    tensors_.push_back(std::move(t));
  }

  // No two tensors share a byte: sorted by offset, each ends at or before the next begins.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const PtnTensorInfo &x = tensors_[a], &y = tensors_[b];
    return x.offset != y.offset ? x.offset < y.offset : x.nbytes < y.nbytes;
  });
  by_offset_ = order;
  for (size_t k = 1; k < order.size(); ++k) {
    const PtnTensorInfo& prev = tensors_[order[k - 1]];
    const PtnTensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.nbytes > cur.offset)  // no overflow: both were checked against data_size
      fail(ErrorKind::Corrupt,
           name_ + ": manifest tensors[" + std::to_string(order[k]) + "] ('" + cur.name + "') field 'offset'",
           "bytes [" + std::to_string(cur.offset) + ", " + std::to_string(cur.offset + cur.nbytes) +
               ") overlap tensors[" + std::to_string(order[k - 1]) + "] ('" + prev.name + "') at [" +
               std::to_string(prev.offset) + ", " + std::to_string(prev.offset + prev.nbytes) + ")");
  }
}

size_t PtnFile::index_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail(ErrorKind::InvalidArgument, name_, "no tensor named '" + name + "'");
  return it->second;
}

bool PtnFile::has_tensor(const std::string& name) const { return by_name_.count(name) != 0; }

const PtnTensorInfo& PtnFile::tensor_info(const std::string& name) const { return tensors_[index_of(name)]; }

Tensor PtnFile::tensor(const std::string& name) const {
  const PtnTensorInfo& t = tensors_[index_of(name)];
  return Tensor::view(t.dtype, t.shape, data_ + data_offset_ + t.offset, storage_);
}

std::vector<std::string> PtnFile::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const PtnTensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

void PtnFile::verify_padding() const {
  if (flags_ & ~kKnownFlags) return;  // an unknown compatible feature may store data there
  auto check_zero = [&](uint64_t begin, uint64_t end, const std::string& what) {
    for (uint64_t i = begin; i < end; ++i)
      if (data_[i] != 0)
        fail(ErrorKind::Corrupt, name_ + ": padding " + what,
             "byte at file offset " + std::to_string(i) + " is " + std::to_string(data_[i]) +
                 ", padding must be zero (the file is damaged)");
  };
  check_zero(PtnLimits::kHeaderSize, data_offset_, "between the header and the data segment");
  uint64_t pos = 0;  // relative to data_offset_
  for (size_t i : by_offset_) {
    const PtnTensorInfo& t = tensors_[i];
    check_zero(data_offset_ + pos, data_offset_ + t.offset, "before tensor '" + t.name + "'");
    pos = std::max(pos, t.offset + t.nbytes);
  }
  check_zero(data_offset_ + pos, data_offset_ + data_size_, "at the end of the data segment");
  check_zero(data_offset_ + data_size_, manifest_offset_, "between the data segment and the manifest");
}

void PtnFile::verify_checksums() const {
  verify_padding();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PtnTensorInfo& t = tensors_[i];
    const uint32_t crc = crc32c(data_ + data_offset_ + t.offset, static_cast<size_t>(t.nbytes));
    if (crc != t.crc32c)
      fail(ErrorKind::Corrupt, name_ + ": tensor '" + t.name + "' (tensors[" + std::to_string(i) + "])",
           "data checksum mismatch: manifest says " + hex32(t.crc32c) + ", the bytes give " + hex32(crc) +
               " (the tensor data is damaged)");
  }
}

bool has_ptn_magic(const void* data, size_t n) {
  return data != nullptr && n >= sizeof kMagic && std::memcmp(data, kMagic, sizeof kMagic) == 0;
}

}  // namespace ptn
