// Errors carry what went wrong, where (file, field, op), and a kind so that callers can tell
// bad input from unsupported input. Nothing in ptn aborts on input: parsers and ops throw
// ptn::Error, and the front ends (CLI, server) catch it and report it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ptn {

enum class ErrorKind {
  InvalidArgument,  // a caller passed something that does not fit (shapes, flags, options)
  Corrupt,          // a file or request is malformed: truncated, out of bounds, inconsistent
  Unsupported,      // well formed, but ptn does not handle it (architecture, dtype, feature)
  Io,               // the operating system refused (open, read, write, mmap)
  Capacity,         // a limit was reached (cache blocks, queue, context)
  Internal,         // a broken invariant inside ptn (a bug, never caused by input alone)
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // where: the file, field or op the error is about, e.g. "model.gguf: tensor 'blk.0.attn_q.weight'".
  Error(ErrorKind kind, std::string where, std::string detail);
  ErrorKind kind() const { return kind_; }
  const std::string& where() const { return where_; }
  const std::string& detail() const { return detail_; }

 private:
  ErrorKind kind_;
  std::string where_;
  std::string detail_;
};

[[noreturn]] void fail(ErrorKind kind, const std::string& where, const std::string& detail);

// Overflow-checked size arithmetic for parsers: throw Corrupt naming `where` on overflow.
uint64_t checked_add(uint64_t a, uint64_t b, const std::string& where);
uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& where);

}  // namespace ptn

// Precondition checks for ops and APIs: `PTN_CHECK(cond, kind, where, message-expression)`.
#define PTN_CHECK(cond, kind, where, msg)                  \
  do {                                                     \
    if (!(cond)) ::ptn::fail((kind), (where), (msg));      \
  } while (0)
