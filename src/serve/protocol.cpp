#include "serve/protocol.h"

namespace ptn::serve {

using json = nlohmann::json;

const json& member(const json& o, const char* key) {
  static const json null_json;
  if (!o.is_object()) return null_json;
  auto it = o.find(key);
  return it == o.end() ? null_json : *it;
}

std::string text_of(const json& o, const char* key) {
  const json& v = member(o, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

int64_t count_of(const json& o, const char* key) {
  const json& v = member(o, key);
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

const json& first_choice(const json& completion) {
  static const json null_json;
  const json& c = member(completion, "choices");
  return c.is_array() && !c.empty() ? c[0] : null_json;
}

ErrorShape error_shape_for_path(const std::string& path) {
  auto starts = [&](const char* prefix) { return path.rfind(prefix, 0) == 0; };
  if (path == "/v1/messages" || starts("/v1/messages/")) return ErrorShape::Anthropic;
  if (starts("/api/")) return ErrorShape::Ollama;
  return ErrorShape::OpenAI;
}

json anthropic_error_body(int status, const std::string& message) {
  const char* type = "api_error";
  switch (status) {
    case 400: case 405: case 408: case 422: case 431: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: case 529: type = "overloaded_error"; break;
    default: type = status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

json ollama_error_body(const std::string& message) { return json{{"error", message}}; }

json error_body_for(ErrorShape shape, int status, const std::string& type, const std::string& message,
                    const std::string& param, const std::string& code) {
  switch (shape) {
    case ErrorShape::Anthropic: return anthropic_error_body(status, message);
    case ErrorShape::Ollama: return ollama_error_body(message);
    case ErrorShape::OpenAI: break;
  }
  return error_body(message, type, param, code);
}

}  // namespace ptn::serve
