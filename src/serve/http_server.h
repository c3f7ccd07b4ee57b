// cpp-httplib's Server with ptn's own connection loop, for what httplib 0.11 does not bound or
// expose:
// - the request line and headers are limited in bytes (httplib takes any number of header
//   lines), a chunked body in bytes (httplib applies its payload limit to Content-Length only),
//   and a whole request must arrive within a deadline (httplib's read timeout is per read, so
//   a client sending a byte now and then could hold a thread for ever);
// - handlers can reach the socket of their connection (current_connection_socket), so a
//   request whose client went away can be cancelled before anything is written to it.
// Everything else (parsing, routing, keep-alive, responses) is httplib's own, reached through
// its protected process_request().
#pragma once
#include <httplib.h>

#include <chrono>
#include <cstddef>

namespace ptn::serve {

struct HttpLimits {
  size_t max_head_bytes = 64 << 10;      // request line + headers
  size_t max_body_bytes = 4u << 20;      // decoded body (checked again after a chunked body is read)
  std::chrono::seconds request_deadline{300};  // from a request's first byte to its last
};

// Why reading the current request stopped early (None: it did not). Deadline: a read waited
// the read timeout, or the whole request took longer than its deadline.
enum class ReadLimit { None, HeadTooLarge, BodyTooLarge, Deadline };

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(const HttpLimits& limits) : limits_(limits) {}

 private:
  // Replaces httplib's per-connection loop (a private virtual of httplib::Server).
  bool process_and_close_socket(int sock) override;
  HttpLimits limits_;
};

// On an HttpServer worker thread: the socket of the connection being served (-1 elsewhere),
// and the limit that stopped reading its current request.
int current_connection_socket();
ReadLimit current_read_limit();

// On an HttpServer worker thread, from a handler that answers before the request body was
// read (httplib reads it only after the pre-routing handler): close the connection after
// this reply instead of keeping it alive, so the unread body is never parsed as the next
// request, and drain what the client still sends (bounded) before closing, so the reply is
// not lost to a reset. Also sets `Connection: close` on `res` so the client does not reuse it.
void close_after_reply(httplib::Response& res);

// True when the peer of connected socket `fd` has closed or reset the connection. Data the
// client sent ahead (a pipelined request) does not count. A client that half-closes (shuts
// down its sending side) while waiting for the response counts as gone, as in most servers.
// Never blocks; false for fd < 0.
bool peer_closed(int fd);

}  // namespace ptn::serve
