#include "serve/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace ptn::serve {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

thread_local int t_socket = -1;
thread_local ReadLimit t_limit = ReadLimit::None;
thread_local bool t_close_after = false;

// poll() for `events` up to `timeout`; >0 ready, 0 timed out, <0 error.
int wait_for(int fd, short events, milliseconds timeout) {
  pollfd p{fd, events, 0};
  const auto end = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (r >= 0 || errno != EINTR) return r;
  }
}

// Closing a socket whose receive queue still holds data sends a reset, and a reset can reach
// the client before it has read the reply. Stop sending, then read and discard what the
// client still sends until it closes, for at most `limit` or `max_bytes`.
void drain_then_close(int sock, milliseconds limit, size_t max_bytes) {
  ::shutdown(sock, SHUT_WR);
  const auto end = Clock::now() + limit;
  char buf[4096];
  for (size_t total = 0; total < max_bytes;) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    if (left.count() <= 0 || wait_for(sock, POLLIN, left) <= 0) break;
    const ssize_t n = ::recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (n > 0) total += static_cast<size_t>(n);
  }
}

milliseconds to_ms(time_t sec, time_t usec) { return milliseconds(sec * 1000 + usec / 1000); }

void address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (r != 0) return;
  if (a.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  else if (a.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  else
    return;
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0)
    ip = host;
}

// One connection's byte stream as httplib reads and writes it, with a small read-ahead buffer
// (httplib reads request lines a byte at a time) and the per-request limits.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(int sock, const HttpLimits& limits, milliseconds read_timeout, milliseconds write_timeout)
      : sock_(sock), limits_(limits), read_timeout_(read_timeout), write_timeout_(write_timeout) {
    // Raw body bytes, chunk framing included: twice the body limit bounds the memory; the
    // decoded size is checked against the limit itself once the body is read.
    max_body_raw_ = 2 * limits_.max_body_bytes + (64u << 10);
  }

  // Waits up to `idle` for the next request's first byte; false when the peer closed, the
  // time ran out or `stopping()` says the server is stopping.
  template <class Stopping>
  bool wait_next_request(milliseconds idle, const Stopping& stopping) {
    if (off_ < len_) return true;
    const auto end = Clock::now() + idle;
    while (!stopping()) {
      const int r = wait_for(sock_, POLLIN, milliseconds(10));
      if (r > 0) return true;
      if (r < 0 || Clock::now() >= end) return false;
    }
    return false;
  }
  void start_request() {
    written_ = 0;
    head_done_ = false;
    tail_ = 0;
    head_bytes_ = body_bytes_ = 0;
    deadline_ = Clock::now() + limits_.request_deadline;
  }
  bool failed() const { return failed_; }
  size_t written() const { return written_; }  // bytes of the current request's reply sent

  bool is_readable() const override { return off_ < len_ || wait_for(sock_, POLLIN, read_timeout_) > 0; }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_timeout_) > 0 && !peer_closed(sock_); }

  ssize_t read(char* ptr, size_t size) override {
    if (failed_) return -1;
    if (off_ == len_) {
      const auto now = Clock::now();
      if (now >= deadline_) return fail(ReadLimit::Deadline);
      const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - now);
      const int r = wait_for(sock_, POLLIN, std::min(read_timeout_, left));
      if (r == 0) return fail(ReadLimit::Deadline);  // the read timeout or the request deadline
      if (r < 0) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buf_, sizeof(buf_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;  // 0: the peer closed
      off_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - off_);
    size_t head = 0;  // bytes of this read that belong to the request line and headers
    for (; head < n && !head_done_; ++head) {
      tail_ = (tail_ << 8) | static_cast<unsigned char>(buf_[off_ + head]);
      head_done_ = tail_ == 0x0d0a0d0au;  // the blank line after the headers
    }
    head_bytes_ += head;
    body_bytes_ += n - head;
    if (head_bytes_ > limits_.max_head_bytes) return fail(ReadLimit::HeadTooLarge);
    if (body_bytes_ > max_body_raw_) return fail(ReadLimit::BodyTooLarge);
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (wait_for(sock_, POLLOUT, write_timeout_) <= 0) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) written_ += static_cast<size_t>(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(sock_, false, ip, port); }
  int socket() const override { return sock_; }

 private:
  ssize_t fail(ReadLimit why) {
    failed_ = true;
    t_limit = why;
    return -1;
  }

  int sock_;
  const HttpLimits& limits_;
  milliseconds read_timeout_, write_timeout_;
  size_t max_body_raw_ = 0;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;  // unread bytes are buf_[off_, len_)
  bool head_done_ = false;
  uint32_t tail_ = 0;         // the last four bytes of the head, to find its end
  size_t head_bytes_ = 0, body_bytes_ = 0;
  size_t written_ = 0;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool failed_ = false;
};

// httplib gives up without a reply when the request line itself cannot be read; when a limit
// stopped it, say so before closing (same error shape as every other reply).
void answer_unreadable_request_line(ConnStream& strm, ReadLimit why) {
  const bool too_long = why == ReadLimit::HeadTooLarge;
  const std::string body = std::string("{\"error\":{\"message\":\"") +
                           (too_long ? "the request line is too long" : "the request did not arrive in time") +
                           "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}";
  const std::string reply = std::string(too_long ? "HTTP/1.1 414 URI Too Long" : "HTTP/1.1 408 Request Timeout") +
                            "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\nConnection: close\r\n\r\n" + body;
  size_t off = 0;
  while (off < reply.size()) {
    const ssize_t n = strm.write(reply.data() + off, reply.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

bool HttpServer::process_and_close_socket(int sock) {
  ConnStream strm(sock, limits_, to_ms(read_timeout_sec_, read_timeout_usec_),
                  to_ms(write_timeout_sec_, write_timeout_usec_));
  t_socket = sock;
  bool ret = false;
  bool drain = false;
  const milliseconds idle(static_cast<int64_t>(keep_alive_timeout_sec_) * 1000);
  for (size_t count = keep_alive_max_count_; count > 0; --count) {
    if (!strm.wait_next_request(idle, [this] { return svr_sock_ == INVALID_SOCKET; })) break;
    strm.start_request();
    t_limit = ReadLimit::None;
    t_close_after = false;
    bool closed = false;
    ret = process_request(strm, count == 1, closed, nullptr);
    if (!ret && strm.failed() && strm.written() == 0 && t_limit != ReadLimit::None)
      answer_unreadable_request_line(strm, t_limit);
    drain = t_close_after;
    if (!ret || closed || strm.failed() || t_close_after) break;
  }
  t_socket = -1;
  t_limit = ReadLimit::None;
  t_close_after = false;
  if (drain) drain_then_close(sock, milliseconds(2000), limits_.max_body_bytes + limits_.max_head_bytes);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

int current_connection_socket() { return t_socket; }
void close_after_reply(httplib::Response& res) {
  res.set_header("Connection", "close");
  t_close_after = true;
}
ReadLimit current_read_limit() { return t_limit; }

bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int r;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  }
  return false;
}

}  // namespace ptn::serve
