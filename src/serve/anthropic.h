// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens) as a Protocol:
// a messages body becomes an OpenAI chat-completions body (system -> a system message, content
// blocks -> text, tool_calls and tool messages, tools -> functions, tool_choice any/tool ->
// required/named), and the chat.completion replies and chunks become a message object and its
// server-sent events (message_start, content_block_start/delta/stop, message_delta,
// message_stop). Errors take Anthropic's shape {"type": "error", "error": {"type", "message"}}.
// Field names in errors are Anthropic's (messages[0].content[1].source). docs/http-api.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api.h"
#include "serve/protocol.h"

namespace ptn::serve {

class AnthropicProtocol : public Protocol {
 public:
  // `model`: the served model (name, chat template). Its chat template says whether
  // `thinking` can be honoured.
  explicit AnthropicProtocol(const ModelInfo& model);

  Translated translate(const std::string& body_text) override;
  nlohmann::json reply(const nlohmann::json& completion) override;
  std::string chunk(const nlohmann::json& chunk) override;
  void set_prompt_tokens(int64_t tokens) override { prompt_tokens_ = tokens; }
  std::string end() override;
  std::string stream_error(int status, const std::string& type, const std::string& message) override;
  nlohmann::json error(int status, const std::string& type, const std::string& message, const std::string& param,
                       const std::string& code) const override;

  // The chat body of a count_tokens request (no max_tokens, no stream): what translate() makes
  // of a messages body with the same messages, system, tools, tool_choice and thinking.
  std::string translate_count(const std::string& body_text);

 private:
  nlohmann::ordered_json translate_body(const nlohmann::ordered_json& body, bool count);
  std::string event(const char* name, const nlohmann::json& data) const;
  std::string open_block(const char* type);  // closes the open block first
  std::string close_block();
  std::string finish(const nlohmann::json* usage);  // message_delta + message_stop

  const ModelInfo model_;  // a copy: the protocol may outlive the caller's object
  std::string id_;  // msg_...
  // Streaming state.
  bool started_ = false, finished_ = false;
  int64_t prompt_tokens_ = 0;  // message_start's usage.input_tokens
  int block_ = -1;          // index of the last block opened
  std::string open_;        // type of the open block ("": none)
  std::string stop_reason_, stop_sequence_;
};

// POST /v1/messages/count_tokens: {"input_tokens": N}, the tokens of the prompt the messages
// body renders to (through parse_chat_request, so the count is what a request would use).
// Throws ApiError.
nlohmann::json anthropic_count_tokens(const std::string& body_text, const ModelInfo& model);

}  // namespace ptn::serve
