// Tool calling (serve/tools.h): the tool fields of a request, the grammar of a forced call and
// the parser of replies, for each format (harmony's replies also through serve/harmony.h). Input: `body-json [\n--reply--\n reply-text]`. Bad
// requests throw ApiError; nothing else may escape. Invariants: a parsed call's arguments are a
// JSON object; the streaming hold-back never passes the text's end; a forced-call grammar built
// from accepted tools always parses, and a reply it accepts in full parses back into calls; a
// harmony stream's reasoning and content only grow and are prefixes of the finished reply's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "serve/api.h"
#include "serve/harmony.h"
#include "serve/tools.h"

namespace ptn::fuzz {

int run_tool_calls(const uint8_t* data, size_t size) {
  auto [body_view, reply_view] = ptn::fuzz::split(data, size, "\n--reply--\n");
  if (body_view.size() > (64u << 10)) return 0;
  const std::string body_text(body_view), reply(reply_view);
  nlohmann::ordered_json body;
  try {
    body = nlohmann::ordered_json::parse(body_text);
  } catch (const std::exception&) {
    return 0;
  }
  if (!body.is_object()) return 0;
  // The smallest templates each format is found from.
  static const char* const kTemplates[] = {"{{ tools }}<tool_call>", "{{ tools }}[TOOL_CALLS]",
                                           "{{ tools }}\"parameters\" ipython",
                                           "{{ tools }}<|channel|><|message|>functions."};
  int ok = 0;
  for (const char* tmpl : kTemplates) {
    std::optional<ptn::serve::ToolRequest> t;
    try {
      t = ptn::serve::parse_tool_request(body, tmpl);
    } catch (const ptn::serve::ApiError&) {
      continue;
    }
    if (!t) continue;
    ok = 1;
    const ptn::serve::ToolOutput out = ptn::serve::parse_tool_output(*t, reply);
    for (const auto& c : out.calls)
      if (!nlohmann::json::parse(c.arguments).is_object()) std::abort();
    for (size_t cut : {reply.size(), reply.size() / 2, reply.size() / 3})
      if (ptn::serve::tool_safe_prefix(*t, reply.substr(0, cut)) > cut) std::abort();
    // The streaming scan agrees with the whole-text answer at every prefix.
    ptn::serve::ToolSafeScan scan(*t);
    for (size_t n = 0; n <= reply.size() && n <= 512; ++n)
      if (scan.update(std::string_view(reply).substr(0, n)) != ptn::serve::tool_safe_prefix(*t, reply.substr(0, n)))
        std::abort();
    if (t->format == ptn::serve::ToolFormat::Harmony) {
      // The harmony stream only grows, and stays a prefix of the finished reply's parts.
      const ptn::serve::HarmonyReply done = ptn::serve::harmony_reply(reply, &*t, true, false);
      ptn::serve::HarmonyStream s;
      size_t r = 0, c = 0;
      for (size_t n = 0; n <= reply.size() && n <= 512; ++n) {
        s.update(reply.substr(0, n));
        if (s.reasoning().size() < r || s.content().size() < c) std::abort();
        if (done.reasoning.compare(0, s.reasoning().size(), s.reasoning()) != 0) std::abort();
        if (done.out.raw_content.compare(0, s.content().size(), s.content()) != 0) std::abort();
        r = s.reasoning().size();
        c = s.content().size();
      }
    }
    if (t->choice != ptn::serve::ToolChoice::Required && t->choice != ptn::serve::ToolChoice::Named) continue;
    std::string gbnf;
    try {
      gbnf = ptn::serve::tool_call_gbnf(*t);
    } catch (const ptn::serve::ApiError&) {
      continue;  // a schema the conversion refuses, named
    }
    std::shared_ptr<const ptn::grammar::Grammar> g;
    try {
      g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(gbnf, "tools"));
    } catch (const ptn::Error& e) {
      if (std::string(e.what()).find("left recursion") == std::string::npos) std::abort();
      continue;
    }
    try {
      ptn::grammar::MatcherLimits ml;
      ml.max_stacks = 256;
      ml.max_expand_steps = 1 << 14;
      ptn::grammar::Matcher m(g, ml);
      if (m.accept(reply) && m.is_complete() && ptn::serve::parse_tool_output(*t, reply).calls.empty()) std::abort();
    } catch (const ptn::Error&) {
    }
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_tool_calls)
