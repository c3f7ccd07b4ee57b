// The Ollama API (POST /api/chat, POST /api/generate, GET /api/tags, POST /api/show,
// GET /api/version, GET /api/ps). Chat and generate are Protocols: the body becomes an OpenAI
// chat-completions body (or a completions body for a raw generate, or a model without a chat
// template), with Ollama's option names mapped (num_predict -> max_tokens, repeat_penalty ->
// repetition_penalty, format -> response_format, think -> the template's enable_thinking), and
// the replies become Ollama's objects, streamed as NDJSON (one object per line, the last with
// done: true and the measured durations in nanoseconds). Errors are {"error": "message"}.
// docs/http-api.md.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api.h"
#include "serve/protocol.h"

namespace ptn::serve {

// What /api/tags, /api/show and /api/ps report about the served model.
struct OllamaModel {
  std::string name;
  std::string family;        // the model family ("llama", "qwen3", ...)
  int64_t context = 0;       // tokens one sequence may hold
  int64_t parameters = 0;    // parameter count (0: unknown)
  uint64_t size = 0;         // bytes of the program file (0: exported in memory)
  int64_t modified = 0;      // unix seconds: the file's time, or when the server started
  std::string chat_template;
  std::string version;       // ptn's version, for /api/version
};

class OllamaProtocol : public Protocol {
 public:
  enum class Endpoint { Chat, Generate };
  // `model`: the served model (name, chat template, context).
  OllamaProtocol(const ModelInfo& model, Endpoint endpoint);

  Translated translate(const std::string& body_text) override;
  nlohmann::json reply(const nlohmann::json& completion) override;
  std::string stream_content_type() const override { return "application/x-ndjson"; }
  std::string chunk(const nlohmann::json& chunk) override;
  std::string end() override;
  std::string stream_error(int status, const std::string& type, const std::string& message) override;
  nlohmann::json error(int status, const std::string& type, const std::string& message, const std::string& param,
                       const std::string& code) const override;

 private:
  nlohmann::json base() const;  // model, created_at
  nlohmann::json final_object(const nlohmann::json& usage, const nlohmann::json& timings) const;
  nlohmann::json message_part(const std::string& content, const std::string& thinking,
                              const nlohmann::json& tool_calls) const;

  const ModelInfo model_;  // a copy: the protocol may outlive the caller's object
  Endpoint endpoint_;
  bool chat_path_ = true;  // the translated body is a chat body (else completions)
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  // Streaming state.
  bool finished_ = false;
  std::string done_reason_;
};

nlohmann::json ollama_tags(const OllamaModel& m);
nlohmann::json ollama_ps(const OllamaModel& m);
nlohmann::json ollama_version(const OllamaModel& m);
// POST /api/show {"model": NAME}: 404 ApiError for another name.
nlohmann::json ollama_show(const std::string& body_text, const OllamaModel& m);

}  // namespace ptn::serve
