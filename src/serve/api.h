// The OpenAI-compatible request and response bodies: parsing with every field checked (an
// ApiError naming the field otherwise; unknown fields are ignored) and the JSON the server
// sends back. See docs/http-api.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "grammar/grammar.h"
#include "serve/engine.h"
#include "serve/harmony.h"
#include "serve/reasoning.h"
#include "serve/tools.h"
#include "tokenizer/tokenizer.h"

namespace ptn::serve {

// An error reply: HTTP status plus the OpenAI error object fields.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

// {"error": {"message", "type", "param", "code"}} (param / code null when empty).
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                          const std::string& code);

// Parses a request body: JSON of at most `max_depth` nesting levels (checked before parsing,
// so a deeply nested body cannot exhaust the stack). Throws ApiError 400.
nlohmann::json parse_body(const std::string& body, int max_depth = 64);

// Most choices one request may ask for (`n`); the engine also caps it at --parallel.
inline constexpr int64_t kMaxChoices = 64;

// What the request handlers need to know about the model.
struct ModelInfo {
  std::string name;
  const Tokenizer* tokenizer = nullptr;
  int64_t context = 0;     // most tokens one sequence may hold
  int64_t vocab = 0;
  // Texts longer than this cannot fit the context (context * the longest token's bytes, with
  // a margin for normalisation), so they are refused before tokenizing. 0: no bound.
  size_t max_prompt_bytes = 0;
  std::string chat_template;  // what /v1/chat/completions renders with ("": chat refused)
  bool parse_special = false;  // request text may hold control tokens (--parse-special; trusted callers)
};

struct ParsedRequest {
  GenRequest gen;
  bool stream = false;
  bool include_usage = false;
  std::shared_ptr<const ToolRequest> tools;  // chat with tools (tool_choice not "none")
  ReasoningMode reasoning;                    // chat: <think> sections become reasoning_content
};

// The output constraint of a body: response_format {"type": "text" | "json_object" |
// "json_schema", "json_schema": {"schema": ...}}, or llama-server's "grammar" (GBNF text) or
// "json_schema" (a schema) - at most one of them. `body_text` is parsed again (parse_body has
// checked it) so that a schema keeps its key order. nullptr: no constraint. ApiError 400 naming
// the field for anything malformed or unsupported (a schema keyword named in the message).
std::shared_ptr<const grammar::Grammar> parse_output_constraint(const std::string& body_text);

// POST /v1/completions body.
ParsedRequest parse_completion_request(const nlohmann::json& body, const ModelInfo& model);
// POST /v1/chat/completions body. Models without a chat template get a 400. `ordered` is the
// same body parsed with its key order (tool schemas and calls keep it), when the caller has it.
// Tools reach the template; a required or named tool_choice becomes the request's grammar.
ParsedRequest parse_chat_request(const nlohmann::json& body, const ModelInfo& model,
                                 const nlohmann::ordered_json* ordered = nullptr);

// Accumulates the events of one request into the response objects.
class ResponseBuilder {
 public:
  ResponseBuilder(bool chat, const ModelInfo& model, std::string id, int64_t created, int logprobs,
                  std::shared_ptr<const ToolRequest> tools = nullptr, ReasoningMode reasoning = {});
  // The streaming chunk for a Delta (null when there is nothing to send).
  nlohmann::json chunk(const Event& delta);
  // The last streaming chunks: with tools, the content held back and the tool_calls delta; then
  // the chunk with the finish_reason. The usage chunk, when asked, follows them.
  std::vector<nlohmann::json> final_chunks(const Event& done);
  nlohmann::json usage_chunk(const Event& done) const;
  // llama-server's "timings" beside "usage": prompt_n (tokens computed, cached ones excluded),
  // prompt_ms (arrival to the first token), predicted_n, predicted_ms (first token to the last).
  static nlohmann::json timings(const Event& done);
  // The sampling seed, returned as "seed" in the response and the last streamed chunk.
  void set_seed(uint64_t seed) { seed_ = seed; }
  // The choice this builder makes (n > 1: one builder per choice).
  void set_index(int index) { index_ = index; }
  // Non-streaming: add a Delta, then the whole response for the Done event.
  void add(const Event& delta);
  nlohmann::json response(const Event& done) const;

 private:
  nlohmann::json logprobs_json(const std::vector<TokenOut>& tokens, size_t text_offset) const;
  nlohmann::json usage(const Event& done) const;
  nlohmann::json base(const char* object) const;
  // With tools or reasoning: the reply parsed into reasoning, content and calls.
  struct Parsed {
    std::string reasoning;
    ToolOutput out;
  };
  Parsed parse_reply(bool trim) const;
  std::string finish_reason(const Event& done, const ToolOutput* out) const;
  bool processed() const { return chat_ && (tools_ || reasoning_.enabled); }
  bool chat_;
  const ModelInfo& model_;
  std::shared_ptr<const ToolRequest> tools_;
  ReasoningMode reasoning_;
  ReasoningStream stream_split_;             // streaming, processed: the reply split as it grows
  HarmonyStream harmony_stream_;             // the same for a harmony reply
  std::unique_ptr<ToolSafeScan> tool_scan_;  // streaming, with tools: where a call may begin
  size_t sent_content_ = 0, sent_reasoning_ = 0;  // streaming, processed: bytes sent of each part
  std::string id_;
  int64_t created_;
  int logprobs_;
  bool sent_role_ = false;
  std::optional<uint64_t> seed_;
  int index_ = 0;
  std::string text_;
  nlohmann::json lp_tokens_ = nlohmann::json::array(), lp_values_ = nlohmann::json::array(),
                 lp_top_ = nlohmann::json::array(), lp_offsets_ = nlohmann::json::array(),
                 lp_content_ = nlohmann::json::array();
};

// JSON text with invalid UTF-8 replaced (token pieces can be partial characters).
std::string dump(const nlohmann::json& j);

}  // namespace ptn::serve
