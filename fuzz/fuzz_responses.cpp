// The Responses API translation (serve/responses.h): a request body, then chat replies and
// chunks turned back into a response and its events. Input: `body-json [\n--chunks--\n one
// chat.completion(.chunk) JSON per line]`. A bad body throws ApiError; nothing else may escape.
// Invariants: an accepted body translates into a JSON object with a non-empty `messages` array;
// every streamed event is `event: T\ndata: {"type": T, "sequence_number": N, ...}` with N counting
// from 0; reply() gives a response object whatever the completion's shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_common.h"
#include "serve/api.h"
#include "serve/responses.h"

namespace ptn::fuzz {

namespace {

// Checks the SSE text of a stream so far; returns the next sequence number.
int64_t check_events(const std::string& sse, int64_t seq) {
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    if (end == std::string::npos) std::abort();
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    if (block.compare(0, 7, "event: ") != 0 || nl == std::string::npos || block.compare(nl + 1, 6, "data: ") != 0)
      std::abort();
    const nlohmann::json d = nlohmann::json::parse(block.substr(nl + 7));  // must parse
    if (d.value("type", "") != block.substr(7, nl - 7) || d.value("sequence_number", int64_t{-1}) != seq) std::abort();
    ++seq;
  }
  return seq;
}

}  // namespace

int run_responses(const uint8_t* data, size_t size) {
  auto [body_view, chunks_view] = split(data, size, "\n--chunks--\n");
  if (body_view.size() > (64u << 10)) return 0;
  serve::ModelInfo model;
  model.name = "stories";
  serve::ResponsesProtocol p(model);
  serve::Protocol::Translated t;
  try {
    t = p.translate(std::string(body_view));
  } catch (const serve::ApiError& e) {
    (void)p.error(e.status, e.type, e.what(), e.param, e.code);
    return 0;
  }
  const nlohmann::json chat = nlohmann::json::parse(t.body);
  if (!chat.is_object() || !chat.contains("messages") || !chat["messages"].is_array() || chat["messages"].empty())
    std::abort();
  // Every chat param a later error could name maps to something.
  for (size_t i = 0; i <= chat["messages"].size(); ++i) {
    (void)p.responses_param("messages[" + std::to_string(i) + "].tool_calls[0].function.arguments");
    (void)p.responses_param("messages[" + std::to_string(i) + "]x");
  }
  int64_t seq = 0;
  std::string chunks(chunks_view);
  size_t pos = 0;
  while (pos <= chunks.size()) {
    size_t nl = chunks.find('\n', pos);
    if (nl == std::string::npos) nl = chunks.size();
    const std::string line = chunks.substr(pos, nl - pos);
    pos = nl + 1;
    (void)p.responses_param(line);
    nlohmann::json c;
    try {
      c = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      continue;
    }
    serve::ResponsesProtocol whole(model);
    const nlohmann::json r = whole.reply(c);
    if (r.value("object", "") != "response" || !r["output"].is_array() || r["output"].empty()) std::abort();
    seq = check_events(p.chunk(c), seq);
  }
  seq = check_events(size % 2 ? p.end() : p.stream_error(500, "server_error", "x"), seq);
  check_events(p.end(), seq);
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_responses)
