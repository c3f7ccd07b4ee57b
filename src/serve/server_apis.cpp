// The routes of the APIs besides OpenAI's: Anthropic's /v1/messages (+ count_tokens), the Ollama
// API, and /v1/models/{id}. Generation requests go through handle_protocol (the one chat path).
#include <httplib.h>

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "serve/anthropic.h"
#include "serve/ollama.h"
#include "serve/protocol.h"
#include "serve/server.h"

#ifndef PTN_VERSION
#define PTN_VERSION "0.0.0"
#endif

namespace ptn::serve {

using json = nlohmann::json;

namespace {

void reply_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

}  // namespace

void Server::routes_other_apis() {
  httplib::Server& s = *http_;

  // --- Anthropic --------------------------------------------------------------------------------
  s.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
    handle_protocol(req, res, std::make_unique<AnthropicProtocol>(model_));
  });
  s.Post("/v1/messages/count_tokens", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.body.size() > opt_.max_body_bytes)
      return reply_json(res, anthropic_error_body(413, too_large_message(opt_.max_body_bytes)), 413);
    try {
      reply_json(res, anthropic_count_tokens(req.body, model_));
    } catch (const ApiError& e) {
      reply_json(res, anthropic_error_body(e.status, e.what()), e.status);
    } catch (const Error& e) {
      reply_json(res, anthropic_error_body(400, e.what()), 400);
    }
  });

  // --- Ollama -----------------------------------------------------------------------------------
  auto facts = std::make_shared<OllamaModel>();
  facts->name = model_.name;
  facts->family = program_->meta().spec.family;
  facts->context = model_.context;
  facts->chat_template = model_.chat_template;
  facts->version = PTN_VERSION;
  facts->modified = created_;
  std::error_code ec;
  const std::filesystem::path file(program_->name());
  if (std::filesystem::is_regular_file(file, ec)) {
    facts->size = std::filesystem::file_size(file, ec);
    if (ec) facts->size = 0;
  }
  s.Post("/api/chat", [this](const httplib::Request& req, httplib::Response& res) {
    handle_protocol(req, res, std::make_unique<OllamaProtocol>(model_, OllamaProtocol::Endpoint::Chat));
  });
  s.Post("/api/generate", [this](const httplib::Request& req, httplib::Response& res) {
    handle_protocol(req, res, std::make_unique<OllamaProtocol>(model_, OllamaProtocol::Endpoint::Generate));
  });
  s.Post("/api/embed", [this](const httplib::Request& req, httplib::Response& res) { handle_ollama_embed(req, res); });
  s.Get("/api/tags", [facts](const httplib::Request&, httplib::Response& res) { reply_json(res, ollama_tags(*facts)); });
  s.Get("/api/ps", [facts](const httplib::Request&, httplib::Response& res) { reply_json(res, ollama_ps(*facts)); });
  s.Get("/api/version",
        [facts](const httplib::Request&, httplib::Response& res) { reply_json(res, ollama_version(*facts)); });
  s.Post("/api/show", [this, facts](const httplib::Request& req, httplib::Response& res) {
    if (req.body.size() > opt_.max_body_bytes)
      return reply_json(res, ollama_error_body(too_large_message(opt_.max_body_bytes)), 413);
    try {
      reply_json(res, ollama_show(req.body, *facts));
    } catch (const ApiError& e) {
      reply_json(res, ollama_error_body(e.what()), e.status);
    }
  });

  // --- /v1/models/{id} --------------------------------------------------------------------------
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
    if (id != model_.name)
      return reply_json(res,
                        error_body("The model '" + id.substr(0, 200) + "' does not exist; this server serves '" +
                                       model_.name + "'",
                                   "invalid_request_error", "model", "model_not_found"),
                        404);
    reply_json(res, json{{"id", model_.name}, {"object", "model"}, {"created", created_}, {"owned_by", "ptn"},
                         {"context_length", model_.context}});
  });
}

}  // namespace ptn::serve
