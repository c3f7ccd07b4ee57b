// Server::handle_embeddings: POST /v1/embeddings through the engine (the inputs share the batch,
// the KV cache, the queue limit and the thread pool with generation).
#include <httplib.h>

#include <ctime>

#include "core/error.h"
#include "serve/embeddings.h"
#include "serve/http_server.h"
#include "serve/protocol.h"
#include "serve/server.h"

namespace ptn::serve {

namespace {

void reply_error(httplib::Response& res, ErrorShape shape, int status, const std::string& type,
                 const std::string& message, const std::string& param = "", const std::string& code = "") {
  res.status = status;
  res.set_content(dump(error_body_for(shape, status, type, message, param, code)), "application/json");
}

Pooling pooling_of(const std::string& name) {
  return name == "mean" ? Pooling::Mean : name == "cls" ? Pooling::Cls : Pooling::Last;
}

// Ollama's /api/embed body as an OpenAI embeddings body: `input` (a string or an array of
// strings), `model`, `dimensions`; `truncate` and `keep_alive` checked (docs/http-api.md).
nlohmann::json ollama_embed_body(const nlohmann::json& body) {
  auto bad = [](const std::string& field, const std::string& why) {
    return ApiError(400, "invalid_request_error", "'" + field + "': " + why, field);
  };
  if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the body must be a JSON object");
  nlohmann::json out = nlohmann::json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (k == "model" || k == "dimensions") {
      out[k] = *it;
    } else if (k == "input") {
      if (!it->is_string() && !it->is_array()) throw bad("input", "must be a string or an array of strings");
      if (it->is_array())
        for (size_t i = 0; i < it->size(); ++i)
          if (!(*it)[i].is_string()) throw bad("input[" + std::to_string(i) + "]", "must be a string");
      out["input"] = *it;
    } else if (k == "truncate") {
      // Ollama cuts an input longer than the context when truncate is true (its default); ptn
      // refuses such an input instead (400 naming it), whatever truncate says.
      if (!it->is_boolean()) throw bad("truncate", "must be a boolean");
    } else if (k == "keep_alive") {
      if (!it->is_string() && !it->is_number()) throw bad("keep_alive", "must be a duration string or a number");
    } else if (k == "options") {
      if (!it->is_object()) throw bad("options", "must be an object");
      if (!it->empty()) throw bad("options." + it->begin().key(), "is not supported for embeddings");
    } else if (!it->is_null()) {
      throw bad(k, "unknown field for /api/embed");
    }
  }
  if (!out.contains("input")) throw bad("input", "is required");
  return out;
}

}  // namespace

bool Server::run_embeddings(httplib::Response& res, const nlohmann::json& body,
                            ErrorShape shape, EmbeddingResult* out) {
  const auto arrival = Clock::now();
  const EmbeddingInfo& info = program_->meta().embedding;
  EmbeddingModel em;
  em.hidden = engine_->hidden_size();
  em.pooling = pooling_of(!opt_.pooling.empty() ? opt_.pooling : info.pooling);
  em.matryoshka = info.matryoshka;
  em.matryoshka_dimensions = info.matryoshka_dimensions;
  ParsedEmbedding pe;
  std::shared_ptr<Channel> ch;
  try {
    pe = parse_embedding_request(body, model_, em);
    pe.req.arrival = arrival;
    ch = engine_->submit_embed(std::move(pe.req));
  } catch (const ApiError& e) {
    reply_error(res, shape, e.status, e.type, e.what(), e.param, e.code);
    return false;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Capacity) {
      res.set_header("Retry-After", "1");
      reply_error(res, shape, 503, "server_error", e.detail(), "", "server_busy");
    } else {
      reply_error(res, shape, 400, "invalid_request_error", e.what());
    }
    return false;
  }
  const int sock = current_connection_socket();
  const auto end = arrival + std::chrono::seconds(opt_.request_timeout_s);
  auto next_check = Clock::now();
  Event e;
  for (;;) {
    const bool got = ch->pop(&e, std::chrono::milliseconds(50));
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::milliseconds(20);
      if (peer_closed(sock)) {  // nobody to answer: the engine drops the inputs and frees their blocks
        ch->cancel();
        res.status = 499;
        return false;
      }
    }
    if (!got) {
      if (Clock::now() > end) {
        ch->cancel();
        reply_error(res, shape, 504, "server_error", "the request took longer than the server's timeout");
        return false;
      }
      continue;
    }
    if (e.kind == Event::Kind::Error) {
      ch->cancel();  // the request's other inputs stop too
      reply_error(res, shape, e.status, e.error_type, e.message);
      return false;
    }
    if (e.kind == Event::Kind::Embedding) {
      if (e.index < 0) continue;
      if (static_cast<size_t>(e.index) >= out->vectors.size()) out->vectors.resize(static_cast<size_t>(e.index) + 1);
      out->vectors[static_cast<size_t>(e.index)] = normalized_embedding(e.embedding, pe.dimensions);
      continue;
    }
    if (e.kind == Event::Kind::Done) break;
  }
  out->base64 = pe.base64;
  out->prompt_tokens = e.prompt_tokens;
  out->seconds = std::chrono::duration<double>(Clock::now() - arrival).count();
  return true;
}

void Server::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  if (req.body.size() > opt_.max_body_bytes) {
    reply_error(res, ErrorShape::OpenAI, 413, "invalid_request_error", too_large_message(opt_.max_body_bytes));
    return;
  }
  nlohmann::json body;
  try {
    body = parse_body(req.body);
  } catch (const ApiError& e) {
    reply_error(res, ErrorShape::OpenAI, e.status, e.type, e.what(), e.param, e.code);
    return;
  }
  EmbeddingResult r;
  if (!run_embeddings(res, body, ErrorShape::OpenAI, &r)) return;
  res.set_content(dump(embedding_response(r.vectors, r.base64, model_.name, r.prompt_tokens)), "application/json");
}

void Server::handle_ollama_embed(const httplib::Request& req, httplib::Response& res) {
  if (req.body.size() > opt_.max_body_bytes) {
    reply_error(res, ErrorShape::Ollama, 413, "invalid_request_error", too_large_message(opt_.max_body_bytes));
    return;
  }
  nlohmann::json body;
  try {
    body = ollama_embed_body(parse_body(req.body));
  } catch (const ApiError& e) {
    reply_error(res, ErrorShape::Ollama, e.status, e.type, e.what(), e.param, e.code);
    return;
  }
  EmbeddingResult r;
  if (!run_embeddings(res, body, ErrorShape::Ollama, &r)) return;
  const int64_t ns = static_cast<int64_t>(r.seconds * 1e9);
  nlohmann::json reply = {{"model", model_.name},
                          {"embeddings", r.vectors},
                          {"total_duration", ns},
                          {"load_duration", 0},
                          {"prompt_eval_count", r.prompt_tokens}};
  res.set_content(dump(reply), "application/json");
}

}  // namespace ptn::serve
