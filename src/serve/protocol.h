// The APIs `ptn serve` speaks besides OpenAI's chat and completions (the Responses API,
// Anthropic's messages, Ollama's chat and generate) are translations: a Protocol turns its
// request body into an OpenAI chat-completions (or completions) body, which then takes the one
// checked path (parse_chat_request, the output constraint, the engine), and turns the
// chat.completion replies and chunks back into its own shapes. One Protocol object serves one
// request, so it may keep state between chunks (ids, sequence numbers, open content blocks).
//
//   Server::handle_protocol(req, res, std::make_unique<ResponsesProtocol>(model));
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api.h"

namespace ptn::serve {

class Protocol {
 public:
  virtual ~Protocol() = default;

  // The translated request. Throws ApiError (with this protocol's field names in the message)
  // for anything malformed or unsupported; nothing is dropped silently.
  struct Translated {
    std::string body;   // an OpenAI chat-completions (chat) or completions body, as JSON text
    bool chat = true;
    bool stream = false;
  };
  virtual Translated translate(const std::string& body_text) = 0;

  // The prompt's token count, known once the translated body has been parsed (before the first
  // chunk), for protocols whose first streamed event carries it.
  virtual void set_prompt_tokens(int64_t /*tokens*/) {}

  // Non-streaming: the reply body built from the chat.completion (or text_completion) object.
  virtual nlohmann::json reply(const nlohmann::json& completion) = 0;

  // Streaming. The server asks for usage itself (whatever the translated body says), so the
  // chunks end with one whose "choices" is empty and which carries "usage" and "timings".
  // chunk() returns the bytes to send for one chunk (may be empty); end() the bytes after the
  // last one (instead of OpenAI's "data: [DONE]").
  virtual std::string stream_content_type() const { return "text/event-stream"; }
  virtual std::string chunk(const nlohmann::json& chunk) = 0;
  virtual std::string end() = 0;
  // An error after the stream has started (the status is no longer sendable).
  virtual std::string stream_error(int status, const std::string& type, const std::string& message) = 0;

  // An error reply in this protocol's shape, sent before a stream starts or instead of a reply.
  // `type` and `code` are the OpenAI names (invalid_request_error, server_error, server_busy...).
  virtual nlohmann::json error(int status, const std::string& type, const std::string& message,
                               const std::string& param, const std::string& code) const = 0;
};

// Readers of the chat path's replies for the protocols, that never throw: a missing or mistyped
// member reads as null / "" / 0 (the server builds these objects, but a protocol trusts no
// shape).
const nlohmann::json& member(const nlohmann::json& o, const char* key);
std::string text_of(const nlohmann::json& o, const char* key);
int64_t count_of(const nlohmann::json& o, const char* key);
const nlohmann::json& first_choice(const nlohmann::json& completion);  // choices[0], or null

// The error shapes of the other APIs, also used for errors raised before a handler runs (401,
// 404, 413, ...), chosen by the request's path.
enum class ErrorShape { OpenAI, Anthropic, Ollama };
ErrorShape error_shape_for_path(const std::string& path);  // /v1/messages...: Anthropic; /api/...: Ollama
// {"type": "error", "error": {"type": <Anthropic's name for the status>, "message"}}
nlohmann::json anthropic_error_body(int status, const std::string& message);
// {"error": message}
nlohmann::json ollama_error_body(const std::string& message);
nlohmann::json error_body_for(ErrorShape shape, int status, const std::string& type, const std::string& message,
                              const std::string& param, const std::string& code);

}  // namespace ptn::serve
