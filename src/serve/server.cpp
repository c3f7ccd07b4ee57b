#include "serve/server.h"

#include <cctype>

#include <httplib.h>

#include <filesystem>

#include <sys/socket.h>

#include <algorithm>
#include <ctime>

#include "core/error.h"
#include "serve/http_server.h"
#include "serve/protocol.h"
#include "serve/responses.h"

namespace ptn::serve {

std::string too_large_message(size_t max_bytes) {
  return "the request body is larger than this server's limit of " + std::to_string(max_bytes) + " bytes";
}

using json = nlohmann::json;

bool keys_equal(const std::string& presented, const std::string& expected) {
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= a ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

std::string bearer_token(const std::string& authorization) {
  // The scheme is case-insensitive (RFC 7235): "Bearer", "bearer", "BEARER", then spaces.
  size_t i = 0;
  while (i < authorization.size() && authorization[i] == ' ') ++i;
  static const std::string scheme = "bearer";
  if (authorization.size() < i + scheme.size() + 1) return "";
  for (size_t k = 0; k < scheme.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(authorization[i + k])) != scheme[k]) return "";
  i += scheme.size();
  if (authorization[i] != ' ') return "";
  while (i < authorization.size() && authorization[i] == ' ') ++i;
  size_t end = authorization.size();
  while (end > i && authorization[end - 1] == ' ') --end;
  return authorization.substr(i, end - i);
}

bool cors_allows(const std::vector<std::string>& origins, const std::string& origin) {
  for (const auto& o : origins)
    if (o == "*" || o == origin) return true;
  return false;
}

void send_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                const std::string& param, const std::string& code) {
  res.status = status;
  res.set_content(dump(error_body(message, type, param, code)), "application/json");
}

namespace {

// An error raised before an endpoint's handler (authentication, routing, limits), in the shape
// the client of that path understands.
void send_routed_error(const httplib::Request& req, httplib::Response& res, int status, const std::string& type,
                       const std::string& message, const std::string& code = "") {
  res.status = status;
  res.set_content(dump(error_body_for(error_shape_for_path(req.path), status, type, message, "", code)),
                  "application/json");
}

std::string endpoint_label(const std::string& path) {
  static const char* known[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                                "/metrics",        "/tokenize",            "/detokenize", "/v1/messages",
                                "/v1/messages/count_tokens", "/api/chat", "/api/generate", "/api/tags",
                                "/api/show",       "/api/version",         "/api/ps",          "/api/embed",
                                "/v1/embeddings",  "/v1/responses",        "/v1/route-key",    "/"};
  for (const char* k : known)
    if (path == k) return k;
  if (path == "/slots") return "/slots";
  if (path.rfind("/slots/", 0) == 0) return "/slots/{id}";
  return "other";
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

// httplib applies its payload limit to Content-Length bodies only; a chunked body (bounded in
// raw bytes by HttpServer) is checked here, once read.
bool body_too_large(const httplib::Request& req, httplib::Response& res, size_t max_bytes) {
  if (req.body.size() <= max_bytes) return false;
  send_routed_error(req, res, 413, "invalid_request_error", too_large_message(max_bytes));
  return true;
}


Server::Server(std::shared_ptr<const Program> program, const ServerOptions& options, ThreadPool* threads)
    : program_(std::move(program)), opt_(options) {
  const auto& meta = program_->meta();
  if (!meta.tokenizer)
    fail(ErrorKind::Unsupported, program_->name(), "the program has no tokenizer; the server needs one");
  tokenizer_ = Tokenizer::create(*meta.tokenizer);
  engine_ = std::make_unique<Engine>(program_, *tokenizer_, opt_.engine, threads, &metrics_);
  model_.name = opt_.model_name;
  if (model_.name.empty()) {  // the file's name without directories and extension
    std::string n = program_->name();
    if (auto slash = n.find_last_of('/'); slash != std::string::npos) n = n.substr(slash + 1);
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".ptn") == 0) n.resize(n.size() - 4);
    model_.name = n.empty() ? "ptn" : n;
  }
  model_.tokenizer = tokenizer_.get();
  model_.chat_template = opt_.chat_template.empty() ? meta.tokenizer->chat_template : opt_.chat_template;
  model_.parse_special = opt_.parse_special;
  model_.context = engine_->context();
  model_.vocab = engine_->vocab_size();
  size_t longest = 1;  // bytes of the longest token
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) longest = std::max(longest, tokenizer_->token_piece(id).size());
  model_.max_prompt_bytes = static_cast<size_t>(model_.context) * longest * 4 + 4096;
  created_ = static_cast<int64_t>(std::time(nullptr));
  if (!opt_.slot_save_path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(opt_.slot_save_path, ec))
      fail(ErrorKind::InvalidArgument, "--slot-save-path", "'" + opt_.slot_save_path + "' is not a directory");
    engine_->kv_identity();  // a program without a file identity cannot save slots: say so now
  }
  HttpLimits limits;
  limits.max_head_bytes = opt_.max_header_bytes;
  limits.max_body_bytes = opt_.max_body_bytes;
  limits.request_deadline =
      std::chrono::seconds(opt_.request_read_timeout_s > 0 ? opt_.request_read_timeout_s : 10 * opt_.read_timeout_s);
  http_ = std::make_unique<HttpServer>(limits);
  routes();
}

Server::~Server() { shutdown(std::chrono::milliseconds(0)); }

void Server::routes() {
  httplib::Server& s = *http_;
  int n_threads = opt_.http_threads > 0 ? opt_.http_threads
                                        : static_cast<int>(std::min<int64_t>(
                                              opt_.engine.max_running + opt_.engine.max_queue + 4, 512));
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  s.set_payload_max_length(opt_.max_body_bytes);
  s.set_read_timeout(opt_.read_timeout_s, 0);
  s.set_write_timeout(opt_.write_timeout_s, 0);
  s.set_keep_alive_timeout(5);
  s.set_tcp_nodelay(true);  // SSE events are small writes: no Nagle delay between them
  // SO_REUSEADDR but not the library's default SO_REUSEPORT (which lets a second server bind
  // the same port silently); remember the socket to enlarge its listen backlog after bind.
  s.set_socket_options([this](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = sock;
  });

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // CORS: an allowed Origin gets the headers on every reply, and its preflight (OPTIONS, which
    // carries no credentials) is answered here, before authentication.
    const std::string origin = req.get_header_value("Origin");
    const bool cors = !origin.empty() && cors_allows(opt_.cors_origins, origin);
    if (cors) {
      res.set_header("Access-Control-Allow-Origin", opt_.cors_origins.size() == 1 && opt_.cors_origins[0] == "*" ? "*" : origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {
      if (cors) {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
      } else {
        send_routed_error(req, res, origin.empty() ? 405 : 403, "invalid_request_error",
                   origin.empty() ? "OPTIONS is only answered to a browser's CORS preflight"
                                  : "origin '" + origin.substr(0, 200) + "' is not allowed (ptn serve --cors-origin)");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    // The page's static files carry no data: a browser must load them to be asked for the key.
    if (opt_.api_key.empty() || req.path == "/health" ||
        ((req.method == "GET" || req.method == "HEAD") && is_webui_path(req.path)))
      return httplib::Server::HandlerResponse::Unhandled;
    // Anthropic's clients send the key as x-api-key; either header is accepted on every path.
    if (keys_equal(bearer_token(req.get_header_value("Authorization")), opt_.api_key) ||
        (req.has_header("x-api-key") && keys_equal(req.get_header_value("x-api-key"), opt_.api_key)))
      return httplib::Server::HandlerResponse::Unhandled;
    send_routed_error(req, res, 401, "invalid_request_error",
                      "missing or wrong API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
                      "invalid_api_key");
    close_after_reply(res);  // the request body was not read
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // The library answers 400 to a request it could not read; say which limit stopped it.
    switch (res.status == 400 ? current_read_limit() : ReadLimit::None) {
      case ReadLimit::HeadTooLarge:
        send_routed_error(req, res, 431, "invalid_request_error", "the request line and headers are too large");
        return;
      case ReadLimit::BodyTooLarge:
        send_routed_error(req, res, 413, "invalid_request_error", too_large_message(opt_.max_body_bytes));
        return;
      case ReadLimit::Deadline:
        send_routed_error(req, res, 408, "invalid_request_error", "the request did not arrive in time");
        return;
      case ReadLimit::None:
        break;
    }
    if (res.status == 404)
      send_routed_error(req, res, 404, "invalid_request_error", "no such endpoint: " + req.method + " " + req.path);
    else if (res.status == 413)
      send_routed_error(req, res, 413, "invalid_request_error", too_large_message(opt_.max_body_bytes));
    else
      send_routed_error(req, res, res.status, "invalid_request_error", "HTTP error " + std::to_string(res.status));
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_routed_error(req, res, 500, "server_error", "internal error: " + what);
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"status", "ok"}}), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", model_.name}, {"object", "model"}, {"created", created_}, {"owned_by", "ptn"},
              {"context_length", model_.context}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (body_too_large(req, res, opt_.max_body_bytes)) return;
    try {
      json body = parse_body(req.body);
      const json* c = nullptr;
      for (const char* name : {"content", "prompt"})
        if (body.contains(name)) c = &body[name];
      if (!c || !c->is_string()) throw ApiError(400, "invalid_request_error", "'content': must be a string", "content");
      bool add_special = true;
      if (body.contains("add_special")) {
        if (!body["add_special"].is_boolean())
          throw ApiError(400, "invalid_request_error", "'add_special': must be a boolean", "add_special");
        add_special = body["add_special"].get<bool>();
      }
      auto ids = tokenizer_->encode(c->get<std::string>(), add_special, /*parse_special=*/true);
      res.set_content(dump(json{{"tokens", ids}}), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e.status, e.type, e.what(), e.param, e.code);
    }
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (body_too_large(req, res, opt_.max_body_bytes)) return;
    try {
      json body = parse_body(req.body);
      if (!body.contains("tokens") || !body["tokens"].is_array())
        throw ApiError(400, "invalid_request_error", "'tokens': must be an array of token ids", "tokens");
      std::vector<int32_t> ids;
      for (const auto& t : body["tokens"]) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer_->vocab_size())
          throw ApiError(400, "invalid_request_error",
                         "'tokens': every entry must be a token id in [0, " +
                             std::to_string(tokenizer_->vocab_size()) + ")",
                         "tokens");
        ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      res.set_content(dump(json{{"content", tokenizer_->decode(ids, false)}}), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e.status, e.type, e.what(), e.param, e.code);
    }
  });
  s.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) { handle_generate(req, res, false); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { handle_generate(req, res, true); });
  s.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) { handle_embeddings(req, res); });
  s.Post("/v1/route-key", [this](const httplib::Request& req, httplib::Response& res) { handle_route_key(req, res); });
  s.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) {
    handle_protocol(req, res, std::make_unique<ResponsesProtocol>(model_));
  });
  routes_other_apis();
  routes_slots();
  if (opt_.webui) routes_webui();
}

void Server::handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (body_too_large(req, res, opt_.max_body_bytes)) return;
  run_generation(req, res, req.body, chat, nullptr);
}

void Server::handle_protocol(const httplib::Request& req, httplib::Response& res, std::unique_ptr<Protocol> protocol) {
  if (body_too_large(req, res, opt_.max_body_bytes)) return;
  std::shared_ptr<Protocol> p(std::move(protocol));
  Protocol::Translated t;
  try {
    t = p->translate(req.body);
  } catch (const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(p->error(e.status, e.type, e.what(), e.param, e.code)), "application/json");
    return;
  } catch (const Error& e) {
    res.status = 400;
    res.set_content(dump(p->error(400, "invalid_request_error", e.what(), "", "")), "application/json");
    return;
  }
  run_generation(req, res, t.body, t.chat, std::move(p));
}

void Server::run_generation(const httplib::Request& req, httplib::Response& res, const std::string& body_text,
                            bool chat, std::shared_ptr<Protocol> proto) {
  const auto arrival = Clock::now();
  // Errors before the reply: OpenAI's object, or the protocol's own shape.
  auto reply_error = [&res, &proto](int status, const std::string& type, const std::string& message,
                                    const std::string& param = "", const std::string& code = "") {
    if (!proto) return send_error(res, status, type, message, param, code);
    res.status = status;
    res.set_content(dump(proto->error(status, type, message, param, code)), "application/json");
  };
  ParsedRequest pr;
  std::shared_ptr<Channel> ch;
  try {
    const json body = parse_body(body_text);
    // A body with tools or tool calls is parsed again in key order (the schemas' properties and
    // the calls' arguments keep it); parse_body has bounded its depth.
    std::unique_ptr<nlohmann::ordered_json> ordered;
    if (chat && body_text.find("tool") != std::string::npos)
      ordered = std::make_unique<nlohmann::ordered_json>(nlohmann::ordered_json::parse(body_text));
    pr = chat ? parse_chat_request(body, model_, ordered.get()) : parse_completion_request(body, model_);
    // Only a body that asks for a constraint is parsed again (in key order, for the schema).
    if (body.is_object() && (body.contains("response_format") || body.contains("grammar") || body.contains("json_schema"))) {
      if (pr.gen.grammar)
        throw ApiError(400, "invalid_request_error",
                       "tool_choice: a required or named tool call and an output constraint (response_format, grammar, "
                       "json_schema) exclude each other",
                       "tool_choice");
      pr.gen.grammar = parse_output_constraint(body_text);
    }
    if (proto) {
      pr.include_usage = true;  // a protocol's last events carry the counts
      proto->set_prompt_tokens(static_cast<int64_t>(pr.gen.prompt.size()));
    }
    pr.gen.arrival = arrival;
    ch = engine_->submit(pr.gen);
  } catch (const ApiError& e) {
    reply_error(e.status, e.type, e.what(), e.param, e.code);
    return;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Capacity) {
      res.set_header("Retry-After", "1");
      reply_error(503, "server_error", e.detail(), "", "server_busy");
    } else {
      reply_error(400, "invalid_request_error", e.what(), e.where() == "n" || e.where() == "id_slot" ? e.where() : "");
    }
    return;
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  // One builder per choice (n > 1: events carry the choice's index).
  auto builders = std::make_shared<std::vector<std::unique_ptr<ResponseBuilder>>>();
  for (int i = 0; i < pr.gen.n; ++i) {
    builders->push_back(std::make_unique<ResponseBuilder>(chat, model_, id, created, pr.gen.logprobs, pr.tools, pr.reasoning));
    builders->back()->set_seed(pr.gen.sampling.seed);
    builders->back()->set_index(i);
  }
  const int n = pr.gen.n;
  auto builder_of = [builders](const Event& e) -> ResponseBuilder& {
    return *(*builders)[e.index >= 0 && e.index < static_cast<int>(builders->size()) ? e.index : 0];
  };
  // The connection's socket, to notice a client that goes away before its result is ready
  // (-1 if it cannot be found: then only the timeout ends an abandoned request).
  const int sock = current_connection_socket();
  if (!pr.stream) {
    const auto end = arrival + std::chrono::seconds(opt_.request_timeout_s);
    auto next_check = Clock::now();
    Event e;
    std::vector<json> choices(static_cast<size_t>(n));
    json reply;
    int64_t completion_tokens = 0;
    int done = 0;
    for (;;) {
      const bool got = ch->pop(&e, std::chrono::milliseconds(50));
      if (Clock::now() >= next_check) {  // (events may arrive every millisecond: check by time)
        next_check = Clock::now() + std::chrono::milliseconds(20);
        if (peer_closed(sock)) {  // nobody to answer: free the request's blocks now
          ch->cancel();
          res.status = 499;  // (never sent; counted in /metrics as "client closed request")
          return;
        }
      }
      if (!got) {
        if (Clock::now() > end) {
          ch->cancel();
          reply_error(504, "server_error", "the request took longer than the server's timeout");
          return;
        }
        continue;
      }
      if (e.kind == Event::Kind::Delta) {
        builder_of(e).add(e);
      } else if (e.kind == Event::Kind::Error) {
        ch->cancel();  // the other choices of the request stop too
        reply_error(e.status, e.error_type, e.message);
        return;
      } else {
        json r = builder_of(e).response(e);
        choices[static_cast<size_t>(std::clamp(e.index, 0, n - 1))] = r["choices"][0];
        completion_tokens += e.completion_tokens;
        if (reply.is_null()) reply = std::move(r);
        if (++done < n) continue;
        // One response: every choice in index order, usage over all of them (the prompt once).
        reply["choices"] = choices;
        reply["usage"]["completion_tokens"] = completion_tokens;
        reply["usage"]["total_tokens"] = reply["usage"]["prompt_tokens"].get<int64_t>() + completion_tokens;
        if (proto) {
          try {
            reply = proto->reply(reply);
          } catch (const std::exception& x) {
            reply_error(500, "server_error", std::string("internal error: ") + x.what());
            return;
          }
        }
        res.set_content(dump(reply), "application/json");
        return;
      }
    }
  }
  const bool include_usage = pr.include_usage;
  struct StreamState {
    bool finished = false;
    int done = 0;
    int64_t completion_tokens = 0;
  };
  auto st = std::make_shared<StreamState>();
  res.set_header("Cache-Control", "no-cache");
  ++open_streams_;
  // OpenAI's stream: "data: <chunk>" events and "data: [DONE]"; a protocol writes its own.
  auto write_chunk = [proto](const json& c) { return proto ? proto->chunk(c) : sse(c); };
  res.set_chunked_content_provider(
      proto ? proto->stream_content_type() : std::string("text/event-stream"),
      [ch, builders, builder_of, include_usage, st, sock, n, proto, write_chunk](size_t, httplib::DataSink& sink) {
        if (st->finished) return false;
        if (!sink.is_writable()) {
          ch->cancel();
          return false;
        }
        Event e;
        if (!ch->pop(&e, std::chrono::milliseconds(50))) {
          // Nothing to write yet (e.g. a long prompt being computed): a write cannot reveal a
          // vanished client, the socket can.
          if (peer_closed(sock)) {
            ch->cancel();
            return false;
          }
          return true;  // poll again
        }
        std::string out;
        try {
          if (e.kind == Event::Kind::Delta) {
            json c = builder_of(e).chunk(e);
            if (!c.is_null()) out = write_chunk(c);
          } else if (e.kind == Event::Kind::Error) {
            ch->cancel();
            out = proto ? proto->stream_error(e.status, e.error_type, e.message)
                        : sse(error_body(e.message, e.error_type, "", "")) + "data: [DONE]\n\n";
            st->finished = true;
          } else {
            for (const auto& c : builder_of(e).final_chunks(e)) out += write_chunk(c);
            st->completion_tokens += e.completion_tokens;
            if (++st->done == n) {  // every choice has ended
              if (include_usage) {
                Event total = e;
                total.completion_tokens = st->completion_tokens;
                out += write_chunk(builder_of(e).usage_chunk(total));
              }
              out += proto ? proto->end() : std::string("data: [DONE]\n\n");
              st->finished = true;
            }
          }
        } catch (const std::exception& x) {  // a protocol's translation failed: end the stream with its error
          ch->cancel();
          out += proto ? proto->stream_error(500, "server_error", std::string("internal error: ") + x.what())
                       : sse(error_body(std::string("internal error: ") + x.what(), "server_error", "", ""));
          st->finished = true;
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          ch->cancel();
          return false;
        }
        if (st->finished) sink.done();
        return true;
      },
      [this, ch](bool success) {
        if (!success) ch->cancel();
        --open_streams_;
      });
}

int Server::bind() {
  int port = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port < 0) fail(ErrorKind::Io, opt_.host + ":" + std::to_string(opt_.port), "cannot bind the listening socket");
  // The library listens with a backlog of 5: a burst of new connections would overflow it and
  // clients would retry their SYN a second later. Linux accepts a new backlog on a second listen().
  if (listen_fd_ >= 0) ::listen(listen_fd_, 1024);
  return port;
}

void Server::start() {
  listener_done_ = false;
  listener_ = std::thread([this] {
    http_->listen_after_bind();
    listener_done_ = true;
  });
}

void Server::shutdown(std::chrono::milliseconds deadline) {
  if (engine_) engine_->drain(deadline);  // running requests finish (or get an error event)
  // Streams may still be writing their last events (the engine has pushed them): let them
  // finish before the HTTP server stops, bounded by the write timeout.
  const auto end = Clock::now() + std::chrono::seconds(std::max(opt_.write_timeout_s, 1));
  while (open_streams_ > 0 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // httplib's stop() does nothing until the listener thread has marked the server running, so a
  // shutdown right after start() could leave that thread blocked in accept() for ever: wait for
  // it to be running (or gone) first, then stop once.
  if (http_ && listener_.joinable()) {
    while (!listener_done_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http_->stop();
  }
  if (listener_.joinable()) listener_.join();
}

}  // namespace ptn::serve
