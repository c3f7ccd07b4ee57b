// Server::handle_embeddings: POST /v1/embeddings through the engine (the inputs share the batch,
// the KV cache, the queue limit and the thread pool with generation).
#include <httplib.h>

#include <ctime>

#include "core/error.h"
#include "serve/embeddings.h"
#include "serve/http_server.h"
#include "serve/server.h"

namespace ptn::serve {

namespace {

void reply_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                 const std::string& param = "", const std::string& code = "") {
  res.status = status;
  res.set_content(dump(error_body(message, type, param, code)), "application/json");
}

Pooling pooling_of(const std::string& name) {
  return name == "mean" ? Pooling::Mean : name == "cls" ? Pooling::Cls : Pooling::Last;
}

}  // namespace

void Server::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  const auto arrival = Clock::now();
  if (req.body.size() > opt_.max_body_bytes) {
    reply_error(res, 413, "invalid_request_error", "the request body is too large");
    return;
  }
  const EmbeddingInfo& info = program_->meta().embedding;
  EmbeddingModel em;
  em.hidden = engine_->hidden_size();
  em.pooling = pooling_of(!opt_.pooling.empty() ? opt_.pooling : info.pooling);
  em.matryoshka = info.matryoshka;
  em.matryoshka_dimensions = info.matryoshka_dimensions;
  ParsedEmbedding pe;
  std::shared_ptr<Channel> ch;
  try {
    pe = parse_embedding_request(parse_body(req.body), model_, em);
    pe.req.arrival = arrival;
    ch = engine_->submit_embed(std::move(pe.req));
  } catch (const ApiError& e) {
    reply_error(res, e.status, e.type, e.what(), e.param, e.code);
    return;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Capacity) {
      res.set_header("Retry-After", "1");
      reply_error(res, 503, "server_error", e.detail(), "", "server_busy");
    } else {
      reply_error(res, 400, "invalid_request_error", e.what());
    }
    return;
  }
  const int sock = current_connection_socket();
  const auto end = arrival + std::chrono::seconds(opt_.request_timeout_s);
  auto next_check = Clock::now();
  std::vector<std::vector<float>> vectors;
  Event e;
  for (;;) {
    const bool got = ch->pop(&e, std::chrono::milliseconds(50));
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::milliseconds(20);
      if (peer_closed(sock)) {  // nobody to answer: the engine drops the inputs and frees their blocks
        ch->cancel();
        res.status = 499;
        return;
      }
    }
    if (!got) {
      if (Clock::now() > end) {
        ch->cancel();
        reply_error(res, 504, "server_error", "the request took longer than the server's timeout");
        return;
      }
      continue;
    }
    if (e.kind == Event::Kind::Error) {
      ch->cancel();  // the request's other inputs stop too
      reply_error(res, e.status, e.error_type, e.message);
      return;
    }
    if (e.kind == Event::Kind::Embedding) {
      if (e.index < 0) continue;
      if (static_cast<size_t>(e.index) >= vectors.size()) vectors.resize(static_cast<size_t>(e.index) + 1);
      vectors[static_cast<size_t>(e.index)] = normalized_embedding(e.embedding, pe.dimensions);
      continue;
    }
    if (e.kind == Event::Kind::Done) break;
  }
  res.set_content(dump(embedding_response(vectors, pe.base64, model_.name, e.prompt_tokens)), "application/json");
}

}  // namespace ptn::serve
