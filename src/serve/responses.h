// POST /v1/responses, OpenAI's Responses API, stateless: a request's `input` items,
// `instructions`, function `tools`, `tool_choice` and `text.format` become an OpenAI
// chat-completions body (so that parse_chat_request checks and serves it), and the
// chat.completion reply or chunks become a `response` object or the Responses streaming events
// (`event: response.output_text.delta` ...). Nothing is stored: `previous_response_id`,
// `conversation` and `item_reference` inputs are refused with a 400 that says so.
// docs/http-api.md, "POST /v1/responses", lists every field and event.
//
//   ResponsesProtocol p(model);
//   auto t = p.translate(body_text);          // throws ApiError naming the Responses field
//   ... serve t.body on the chat path ...
//   json r = p.reply(chat_completion);        // or: p.chunk(chunk)... then p.end()
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/protocol.h"

namespace ptn::serve {

// Limits of a request beyond the body size.
inline constexpr size_t kMaxResponseInputItems = 4096;
inline constexpr size_t kMaxMetadataKeys = 16;

class ResponsesProtocol : public Protocol {
 public:
  explicit ResponsesProtocol(const ModelInfo& model);

  Translated translate(const std::string& body_text) override;
  nlohmann::json reply(const nlohmann::json& completion) override;
  std::string chunk(const nlohmann::json& chunk) override;
  std::string end() override;
  std::string stream_error(int status, const std::string& type, const std::string& message) override;
  // The OpenAI error object; a chat-path `param` (max_tokens, messages[3].content,
  // response_format...) is renamed to the Responses field it came from.
  nlohmann::json error(int status, const std::string& type, const std::string& message, const std::string& param,
                       const std::string& code) const override;

  // The Responses name of a field of the translated chat body ("max_tokens" ->
  // "max_output_tokens", "messages[2]" -> "input[1]", ...); "" stays "".
  std::string responses_param(const std::string& chat_param) const;

 private:
  // The response object with the request's echoed settings, `status` and `output`.
  nlohmann::json response_object(const std::string& status) const;
  // One SSE event `event: TYPE\ndata: {...}\n\n`, numbered.
  std::string event(const std::string& type, nlohmann::json data);
  // Streaming: the events that open the stream (once), open or close output items.
  std::string start_stream();
  std::string open_message();
  std::string open_reasoning();
  std::string close_open_item();
  std::string function_call_item(const std::string& call_id, const std::string& name, const std::string& arguments);
  // The final status from a chat finish_reason ("length": incomplete).
  void set_finish(const std::string& finish_reason);
  nlohmann::json usage_json(const nlohmann::json& chat_usage) const;

  const ModelInfo& model_;
  std::string id_;
  int64_t created_at_ = 0;
  // What the response echoes from the request.
  nlohmann::ordered_json echo_;
  // Which Responses field each translated chat message came from ("instructions", "input[3]").
  std::vector<std::string> message_source_;
  // For each message, the function_call item each of its tool_calls came from.
  std::vector<std::vector<std::string>> call_source_;

  // The reply, as it is built (streaming) or at once (reply()).
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json usage_;  // null until known
  bool incomplete_ = false;
  bool finished_ = false;         // a finish_reason was seen
  // Streaming state.
  int64_t sequence_ = 0;
  bool started_ = false;
  bool ended_ = false;   // end() has sent the final event
  bool failed_ = false;  // stream_error() has
  enum class Open { None, Message, Reasoning } open_ = Open::None;
  std::string open_id_;
  std::string open_text_;
};

}  // namespace ptn::serve
