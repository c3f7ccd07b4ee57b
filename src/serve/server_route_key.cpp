// Server::handle_route_key: POST /v1/route-key?k=K with a completion or chat body: the hash of
// the first K tokens of the prompt it would run, for a router's consistent hashing
// (X-Prefix-Key, deploy/haproxy.cfg, docs/scale-out.md). Nothing is generated.
#include <httplib.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "kvcache/prefix_index.h"
#include "serve/api.h"
#include "serve/http_server.h"
#include "serve/server.h"

namespace ptn::serve {

void Server::handle_route_key(const httplib::Request& req, httplib::Response& res) {
  auto reply_error = [&](int status, const std::string& type, const std::string& message, const std::string& param) {
    send_error(res, status, type, message, param);
  };
  if (body_too_large(req, res, opt_.max_body_bytes)) return;
  try {
    int64_t k = 256;
    if (req.has_param("k")) {
      const std::string v = req.get_param_value("k");
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < 1 ||
          std::stoll(v) > 65536)
        throw ApiError(400, "invalid_request_error", "'k': must be a number of tokens in 1..65536", "k");
      k = std::stoll(v);
    }
    const nlohmann::json body = parse_body(req.body);
    const bool chat = body.is_object() && body.contains("messages");
    ParsedRequest pr = chat ? parse_chat_request(body, model_) : parse_completion_request(body, model_);
    const std::vector<int32_t>& prompt = pr.gen.prompt;
    const int64_t n = std::min<int64_t>(k, static_cast<int64_t>(prompt.size()));
    const uint64_t h = kv::hash_block(kv::prefix_root(), prompt.data(), n);
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    res.set_content(dump(nlohmann::json{{"route_key", hex}, {"tokens", n}, {"k", k}, {"prompt_tokens", prompt.size()}}),
                    "application/json");
  } catch (const ApiError& e) {
    reply_error(e.status, e.type, e.what(), e.param);
  } catch (const Error& e) {
    reply_error(400, "invalid_request_error", e.what(), "");
  }
}

}  // namespace ptn::serve
