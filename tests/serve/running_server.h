// A ptn::serve::Server running in the test process on a free loopback port, with the HTTP
// calls the serve tests make of it. Header-only; the tests of tests/serve include it.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/threadpool.h"
#include "runtime/program.h"
#include "serve/server.h"

namespace ptn::testing {

// One worker thread for every server of a test process: the model is tiny and the machine shared.
inline ThreadPool& serve_pool() {
  static ThreadPool p(1);
  return p;
}

struct RunningServer {
  std::unique_ptr<serve::Server> server;
  int port = 0;

  // Loads the program at `path` and serves it with `o` on 127.0.0.1 and a port the system picks.
  RunningServer(const std::string& path, serve::ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    server = std::make_unique<serve::Server>(Program::load(path), o, &serve_pool());
    port = server->bind();
    server->start();
  }
  ~RunningServer() { server->shutdown(std::chrono::seconds(5)); }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  // A client with 60 s read and write timeouts.
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    c.set_write_timeout(60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const nlohmann::json& body, const httplib::Headers& headers = {}) const {
    auto c = client();
    return c.Post(path, headers, body.dump(), "application/json");
  }
  // The parsed body of a POST that must answer `status` (null when it did not).
  nlohmann::json post_ok(const std::string& path, const nlohmann::json& body, int status = 200) const {
    auto res = post(path, body);
    EXPECT_TRUE(res);
    if (!res) return nlohmann::json();
    EXPECT_EQ(res->status, status) << res->body;
    return res->status == status ? nlohmann::json::parse(res->body) : nlohmann::json();
  }
};

}  // namespace ptn::testing
