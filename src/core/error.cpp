#include "core/error.h"

namespace ptn {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::Corrupt: return "corrupt input";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Io: return "i/o error";
    case ErrorKind::Capacity: return "capacity exceeded";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

static std::string compose(ErrorKind kind, const std::string& where, const std::string& detail) {
  std::string s = where.empty() ? std::string() : where + ": ";
  return s + detail + " (" + error_kind_name(kind) + ")";
}

Error::Error(ErrorKind kind, std::string where, std::string detail)
    : std::runtime_error(compose(kind, where, detail)),
      kind_(kind),
      where_(std::move(where)),
      detail_(std::move(detail)) {}

void fail(ErrorKind kind, const std::string& where, const std::string& detail) {
  throw Error(kind, where, detail);
}

uint64_t checked_add(uint64_t a, uint64_t b, const std::string& where) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(ErrorKind::Corrupt, where, "size arithmetic overflows");
  return r;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& where) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(ErrorKind::Corrupt, where, "size arithmetic overflows");
  return r;
}

}  // namespace ptn
