// The translators of the other APIs (serve/anthropic.h, serve/ollama.h): a request body through
// AnthropicProtocol::translate and translate_count and OllamaProtocol::translate (chat and
// generate), against a plain template and one with a reasoning switch; then a reply JSON through
// every protocol's reply / chunk / end / stream_error. Input: `body [\n--reply--\n reply-json]`.
// Bad requests throw ApiError; nothing else may escape. Invariants: an accepted body translates
// to a JSON object whose stream flag matches Translated::stream; replies are JSON objects;
// Anthropic's stream is whole `event:` / `data: <JSON>` pairs; Ollama's lines are JSON objects.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "fuzz_common.h"
#include "serve/anthropic.h"
#include "serve/api.h"
#include "serve/ollama.h"

namespace ptn::fuzz {

namespace {

void check_sse(const std::string& s) {
  std::istringstream in(s);
  std::string line;
  bool want_data = false;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) {
      if (want_data) std::abort();
      want_data = true;
    } else if (line.rfind("data: ", 0) == 0) {
      if (!want_data || !nlohmann::json::parse(line.substr(6)).is_object()) std::abort();
      want_data = false;
    } else if (!line.empty()) {
      std::abort();
    }
  }
  if (want_data) std::abort();
}

void check_ndjson(const std::string& s) {
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (!nlohmann::json::parse(line).is_object()) std::abort();
}

// Feeds the reply JSON as a completion and as chunks; checks the shapes of what comes out.
void drive(ptn::serve::Protocol& p, const nlohmann::json& reply, bool sse) {
  if (!p.reply(reply).is_object()) std::abort();
  std::string out = p.chunk(reply);
  out += p.chunk(reply);
  out += p.end();
  out += p.stream_error(500, "server_error", "x");
  if (!p.error(400, "invalid_request_error", "m", "p", "c").is_object()) std::abort();
  sse ? check_sse(out) : check_ndjson(out);
}

}  // namespace

int run_protocols(const uint8_t* data, size_t size) {
  auto [body_view, reply_view] = ptn::fuzz::split(data, size, "\n--reply--\n");
  if (body_view.size() > (64u << 10)) return 0;
  const std::string body(body_view);
  nlohmann::json reply = nlohmann::json::parse(reply_view, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) reply = nlohmann::json::object();
  static const char* const kTemplates[] = {"{% for m in messages %}{{ m.content }}{% endfor %}",
                                           "{{ tools }}<think></think>{{ enable_thinking }}{{ reasoning_effort }}"};
  int ok = 0;
  for (const char* tmpl : kTemplates) {
    ptn::serve::ModelInfo m;
    m.name = "m";
    m.chat_template = tmpl;
    m.context = 256;
    auto accepted = [&](const ptn::serve::Protocol::Translated& t) {
      const nlohmann::json j = nlohmann::json::parse(t.body);
      if (!j.is_object() || (j.contains("stream") && j["stream"] == true) != t.stream) std::abort();
      ok = 1;
    };
    {
      ptn::serve::AnthropicProtocol p(m);
      try {
        accepted(p.translate(body));
      } catch (const ptn::serve::ApiError&) {
      }
      drive(p, reply, /*sse=*/true);
      try {
        if (!nlohmann::json::parse(p.translate_count(body)).is_object()) std::abort();
      } catch (const ptn::serve::ApiError&) {
      }
    }
    for (auto ep : {ptn::serve::OllamaProtocol::Endpoint::Chat, ptn::serve::OllamaProtocol::Endpoint::Generate}) {
      ptn::serve::OllamaProtocol p(m, ep);
      try {
        const auto t = p.translate(body);
        // Ollama streams unless told not to, so an accepted body without "stream" streams.
        accepted(t);
      } catch (const ptn::serve::ApiError&) {
      }
      drive(p, reply, /*sse=*/false);
    }
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_protocols)
