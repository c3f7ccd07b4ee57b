#include "generate/chat_session.h"

#include <algorithm>
#include <utility>

#include "chat/chat_template.h"
#include "core/error.h"
#include "core/text.h"
#include "generate/chat_prompt.h"
#include "generate/session_generate.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace ptn {

namespace {

constexpr size_t kMaxMessages = 100000;
const char* const kFallbackStop = "\nUser:";

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

const std::string& ChatSession::fallback_template() {
  static const std::string t =
      "{% for m in messages %}"
      "{% if m.role == 'system' %}System: {% elif m.role == 'user' %}User: "
      "{% elif m.role == 'assistant' %}Assistant: {% else %}Tool: {% endif %}"
      "{{ m.content | trim }}{{ '\\n' }}"
      "{% endfor %}"
      "{% if add_generation_prompt %}Assistant:{% endif %}";
  return t;
}

ChatSession::ChatSession(Session& session, const Tokenizer& tokenizer, ChatConfig config, const SamplingParams& sampling)
    : session_(session), tok_(tokenizer), config_(std::move(config)) {
  fallback_ = config_.chat_template.empty();
  if (fallback_) config_.chat_template = fallback_template();
  if (config_.max_reply_tokens < 0) fail(ErrorKind::InvalidArgument, "chat", "the reply limit must be >= 0");
  const int64_t vocab = session_.program().meta().spec.vocab_size;
  if (tok_.vocab_size() > vocab)
    fail(ErrorKind::InvalidArgument, "chat",
         "the tokenizer has " + std::to_string(tok_.vocab_size()) + " tokens, the model only " + std::to_string(vocab));
  sampling_ = validate_sampling_params(sampling, vocab);
  reset();
}

ChatSession::~ChatSession() = default;

std::string ChatSession::render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  chat::ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = config_.bos_token;
  o.eos_token = config_.eos_token;
  return chat::render_chat(config_.chat_template, messages, o);
}

std::vector<int32_t> ChatSession::tokenize(const std::string& rendered) const {
  std::vector<int32_t> ids = tok_.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
  gen::add_chat_bos(tok_, ids);
  return ids;
}

std::vector<int32_t> ChatSession::prompt_ids(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  chat::ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = config_.bos_token;
  o.eos_token = config_.eos_token;
  return gen::render_chat_prompt(tok_, config_.chat_template, messages, o, config_.parse_special).ids;
}

gen::GenerationParams ChatSession::reply_params() const {
  gen::GenerationParams p;
  p.sampling = sampling_;
  p.sampling.seed = sampling_.seed + replies_;
  p.stop.max_tokens = config_.max_reply_tokens;
  p.stop.stop = config_.stop;
  if (fallback_) p.stop.stop.push_back(kFallbackStop);
  p.stop.stop_at_bos = config_.stop_at_bos;
  return p;
}

void ChatSession::rewind_to_common_prefix(const std::vector<int32_t>& target) {
  int64_t keep = static_cast<int64_t>(common_prefix(cached_, target));
  if (session_.cache() && keep < session_.cache()->rewind_floor(0)) keep = 0;  // a window released those positions
  session_.rewind(keep);
  cached_.resize(static_cast<size_t>(keep));
}

const float* ChatSession::sync(const std::vector<int32_t>& target, int64_t* fed) {
  if (target.empty()) fail(ErrorKind::Internal, "chat", "nothing to feed");
  if (static_cast<int64_t>(target.size()) > session_.context())
    fail(ErrorKind::Capacity, "chat",
         "the conversation is " + std::to_string(target.size()) + " tokens, more than the context of " +
             std::to_string(session_.context()) + " (use /undo or /reset, or a larger --ctx)");
  // Keep the shared prefix, but always run at least the last token: its logits are needed.
  std::vector<int32_t> shared(target.begin(), target.end() - 1);
  rewind_to_common_prefix(shared);
  std::vector<int32_t> rest(target.begin() + static_cast<int64_t>(cached_.size()), target.end());
  try {
    const float* logits = session_.feed(rest);
    cached_ = target;
    if (fed) *fed = static_cast<int64_t>(rest.size());
    return logits;
  } catch (...) {
    session_.reset();
    cached_.clear();
    throw;
  }
}

ChatReply ChatSession::send(const std::string& user_text, const std::function<void(const std::string&)>& on_text) {
  messages_.push_back({{"role", "user"}, {"content", user_text}});
  ChatReply r;
  const float* logits = nullptr;
  try {
    std::vector<int32_t> prompt = prompt_ids(messages_, true);
    r.prompt_tokens = static_cast<int64_t>(prompt.size());
    if (r.prompt_tokens >= session_.context())
      fail(ErrorKind::Capacity, "chat",
           "the conversation is " + std::to_string(prompt.size()) + " tokens and the context holds " +
               std::to_string(session_.context()) + ", leaving no room for a reply (use /undo or /reset, or a larger --ctx)");
    logits = sync(prompt, &r.fed_tokens);
  } catch (...) {
    messages_.erase(messages_.size() - 1);
    throw;
  }

  auto emit = [&](std::string s) {
    // the plain format's "Assistant:" is followed by a space the reply does not need
    if (fallback_ && r.text.empty()) s.erase(0, std::min(s.size(), s.find_first_not_of(" \t")));
    if (s.empty()) return;
    r.text += s;
    if (on_text) on_text(s);
  };
  try {
    gen::Generator g(tok_, session_.program().meta().spec.vocab_size, reply_params(),
                     session_.context() - r.prompt_tokens);
    ++replies_;
    // (With speculation the drafts are looked up in the whole conversation the cache holds.)
    auto on_step = [&](const gen::StepResult& st) { emit(st.text); };
    const gen::Finish f =
        config_.drafter
            ? gen::generate_on_session(session_, g, logits, on_step, *config_.drafter, config_.draft_max, cached_,
                                       &r.speculation)
            : gen::generate_on_session(session_, g, logits, on_step, config_.lookup, cached_, &r.speculation);
    r.tokens = g.tokens();
    r.reply_tokens = static_cast<int64_t>(r.tokens.size());
    r.stop = gen::finish_name(f);
    cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end() - 1);  // the last one is never fed
  } catch (...) {  // the conversation stays as it was; the cache starts over at the next turn
    messages_.erase(messages_.size() - 1);
    session_.reset();
    cached_.clear();
    throw;
  }
  messages_.push_back({{"role", "assistant"}, {"content", fallback_ ? text::trim(r.text) : r.text}});
  return r;
}

void ChatSession::adopt_cache(const std::vector<int32_t>& tokens) {
  if (session_.position() != static_cast<int64_t>(tokens.size()))
    fail(ErrorKind::InvalidArgument, "chat",
         "adopt_cache: the session holds " + std::to_string(session_.position()) + " tokens, not " +
             std::to_string(tokens.size()));
  cached_ = tokens;
}

void ChatSession::reset() {
  messages_ = nlohmann::ordered_json::array();
  if (!config_.system.empty()) messages_.push_back({{"role", "system"}, {"content", config_.system}});
  session_.reset();
  cached_.clear();
  replies_ = 0;
}

int64_t ChatSession::undo(int64_t n) {
  if (n <= 0) fail(ErrorKind::InvalidArgument, "/undo", "the number of exchanges must be >= 1");
  int64_t dropped = 0;
  size_t cut = messages_.size();
  for (size_t i = messages_.size(); i-- > 0 && dropped < n;) {
    if (messages_[i]["role"] == "user") {
      cut = i;
      ++dropped;
    }
  }
  if (dropped == 0) return 0;
  messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(cut), messages_.end());
  if (messages_.empty()) {
    session_.reset();
    cached_.clear();
    return dropped;
  }
  try {
    rewind_to_common_prefix(prompt_ids(messages_, false));
  } catch (const Error&) {  // a template that cannot render this prefix alone: start the cache over
    session_.reset();
    cached_.clear();
  }
  return dropped;
}

void ChatSession::load(const nlohmann::ordered_json& conversation, const std::string& where) {
  const nlohmann::ordered_json* list = &conversation;
  if (conversation.is_object() && conversation.contains("messages")) list = &conversation["messages"];
  if (!list->is_array())
    fail(ErrorKind::InvalidArgument, where, "expected a JSON array of messages or an object with \"messages\"");
  if (list->size() > kMaxMessages)
    fail(ErrorKind::InvalidArgument, where, "more than " + std::to_string(kMaxMessages) + " messages");
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& m = (*list)[i];
    const std::string at = where + ": messages[" + std::to_string(i) + "]";
    if (!m.is_object()) fail(ErrorKind::InvalidArgument, at, "must be an object with \"role\" and \"content\"");
    auto role = m.find("role");
    auto content = m.find("content");
    if (role == m.end() || !role->is_string()) fail(ErrorKind::InvalidArgument, at + ".role", "must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      fail(ErrorKind::InvalidArgument, at + ".role", "must be system, user, assistant or tool (got '" + r.substr(0, 40) + "')");
    if (content == m.end() || !content->is_string()) fail(ErrorKind::InvalidArgument, at + ".content", "must be a string");
    msgs.push_back({{"role", r}, {"content", content->get<std::string>()}});
  }
  if (msgs.empty()) {
    messages_ = std::move(msgs);
    session_.reset();
    cached_.clear();
    return;
  }
  std::vector<int32_t> target = prompt_ids(msgs, false);
  sync(target, nullptr);
  messages_ = std::move(msgs);
}

}  // namespace ptn
