// A multi-turn chat on one Session: the conversation is a list of {"role", "content"} messages;
// each turn renders the whole conversation with the model's chat template
// (add_generation_prompt), tokenizes it, and feeds only the tokens past the longest common
// prefix with what the cache already holds (rewinding first when the render changed earlier
// tokens). The reply is sampled until an end-of-generation token, BOS, the reply limit or the
// end of the context.
//
// A model without a chat template uses the plain format (fallback_template()):
//   "System: <text>\n" "User: <text>\n" "Assistant: <text>\n" ... then "Assistant:"
// and its reply also ends at a line starting with "User:".
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"

namespace ptn {

class Session;
class Tokenizer;

// Streams text but holds back any tail that may be the start of `stop`, so that text cut at
// the stop string never shows part of it. An empty stop passes everything through.
class StopTextFilter {
 public:
  explicit StopTextFilter(std::string stop) : stop_(std::move(stop)) {}
  // The text that can be shown now; sets *hit (and drops the stop text and anything after it
  // in this piece) when the stop text has appeared.
  std::string push(const std::string& piece, bool* hit);
  std::string finish();  // what was held back (the stream ended without the stop text)

 private:
  std::string stop_, pending_;
};

struct ChatConfig {
  std::string chat_template;  // Jinja source; "" selects the plain fallback format
  std::string bos_token, eos_token;  // as the template sees them
  std::string system;         // a system message starting every conversation ("" for none)
  int64_t max_reply_tokens = 0;  // 0: until EOG or the end of the context
};

struct ChatReply {
  std::string text;
  int64_t prompt_tokens = 0;   // tokens of the rendered conversation
  int64_t fed_tokens = 0;      // of those, the ones actually run (the rest came from the cache)
  int64_t reply_tokens = 0;
  std::string stop;            // "eog", "bos", "stop_text", "limit", "context"
};

class ChatSession {
 public:
  ChatSession(Session& session, const Tokenizer& tokenizer, ChatConfig config, const SamplingParams& sampling);
  ~ChatSession();

  bool uses_fallback() const { return fallback_; }
  static const std::string& fallback_template();

  // Adds the user message, generates and records the reply; on_text receives it as it streams.
  // On error (template error, conversation too long for the context) the user message is
  // dropped again and ptn::Error is thrown; the session stays usable.
  ChatReply send(const std::string& user_text, const std::function<void(const std::string&)>& on_text = {});

  // Back to the system message only; the cache is emptied.
  void reset();
  // Drops the last n exchanges (a user message and the replies after it); returns how many were
  // dropped. The cache is rewound to the tokens the shorter conversation still shares.
  int64_t undo(int64_t n);

  // The conversation as a JSON array of messages (the system message included).
  const nlohmann::ordered_json& messages() const { return messages_; }
  // Replaces the conversation (an array of messages, or {"messages": [...]}): checks every
  // message (role system/user/assistant/tool, content a string), renders it and feeds it.
  // Throws ptn::Error naming `where` and the message index; the old conversation then stays.
  void load(const nlohmann::ordered_json& conversation, const std::string& where);

  // The rendered conversation and its tokens (BOS first when the model adds one and the
  // template did not write it).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;
  std::vector<int32_t> tokenize(const std::string& rendered) const;
  // The tokens the session's cache holds, in order.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }

 private:
  // Makes the cache hold exactly `target` (target non-empty) and returns the logits after
  // its last token. Returns how many tokens were run through the model in *fed.
  const float* sync(const std::vector<int32_t>& target, int64_t* fed);
  void rewind_to_common_prefix(const std::vector<int32_t>& target);

  Session& session_;
  const Tokenizer& tok_;
  ChatConfig config_;
  bool fallback_ = false;
  std::unique_ptr<SamplerChain> chain_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int32_t> cached_;
};

}  // namespace ptn
