// `ptn serve`: the HTTP front end (cpp-httplib) over the Engine. Endpoints and error codes are
// described in docs/http-api.md.
//
//   Server server(program, options, &threads);
//   int port = server.bind();      // port 0 picks a free port
//   server.start();                // serves on a background thread
//   ...
//   server.shutdown(std::chrono::seconds(10));  // refuse new work, let running requests finish
#pragma once
#include <chrono>
#include <cstdint>
#include <atomic>
#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "serve/api.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/protocol.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ptn::serve {

class Protocol;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;                        // empty: no authentication
  std::vector<std::string> cors_origins;      // origins a browser may call from ("*": any); empty: no CORS
  std::string model_name;                     // empty: the program's name
  std::string chat_template;                  // Jinja source; empty: the program's own
  bool parse_special = false;                 // control-token text in requests becomes control tokens
  std::string pooling;                        // embeddings: "last", "mean", "cls"; "": the program's (else last)
  size_t max_body_bytes = 4u << 20;           // larger bodies get 413
  size_t max_header_bytes = 64u << 10;        // request line + headers; larger get 431
  int read_timeout_s = 30;                    // socket read / write timeouts
  int write_timeout_s = 30;
  int request_read_timeout_s = 0;             // a whole request must arrive within this (0: 10 x read)
  int request_timeout_s = 600;                // a non-streaming request waits at most this long
  int http_threads = 0;                       // 0: max_running + max_queue + 4, at most 512
  bool webui = true;                          // the chat page at / (serve/webui.h); off: / is a 404
  std::string slot_save_path;                 // a directory: /slots/{id}?action=save|restore files live there ("": off)
  EngineOptions engine;
};

// The message of a 413: the body is larger than `max_bytes`, the server's limit.
std::string too_large_message(size_t max_bytes);
// An OpenAI-shaped error reply.
void send_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                const std::string& param = "", const std::string& code = "");
// Answers 413 (in the shape of the request's API) when the body is larger than `max_bytes`.
bool body_too_large(const httplib::Request& req, httplib::Response& res, size_t max_bytes);
// Whether `name` may name a file under --slot-save-path: 1..128 of [A-Za-z0-9._-], not
// starting with '.', so it can reach no other directory and no hidden file.
bool valid_slot_filename(const std::string& name);

class Server {
 public:
  Server(std::shared_ptr<const Program> program, const ServerOptions& options, ThreadPool* threads);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket and returns the port. Throws ptn::Error (Io) on failure.
  int bind();
  // Serves on a background thread (after bind()).
  void start();
  // Stops accepting generation requests (503), lets running ones finish until `deadline`,
  // cancels the rest, then stops the HTTP server. Safe to call more than once.
  void shutdown(std::chrono::milliseconds deadline);

  const ModelInfo& model() const { return model_; }
  Metrics& metrics() { return metrics_; }
  Engine& engine() { return *engine_; }

 private:
  void routes();
  // Anthropic's /v1/messages, the Ollama API and /v1/models/{id} (server_apis.cpp).
  void routes_other_apis();
  // The chat page: GET / and /webui/<file> (server_webui.cpp).
  void routes_webui();
  // Whether `path` is one of the page's files (served without the API key: the page asks for it).
  bool is_webui_path(const std::string& path) const;
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat);
 public:
  // Another API's request (Responses, Anthropic, Ollama): translated into a chat or completions
  // body by `protocol`, run like handle_generate, the replies turned back into its shapes.
  void handle_protocol(const httplib::Request& req, httplib::Response& res, std::unique_ptr<Protocol> protocol);

 private:
  // The one generation path: `body_text` is an OpenAI chat (chat) or completions body; with a
  // protocol, errors, the reply and the stream are in its shapes.
  void run_generation(const httplib::Request& req, httplib::Response& res, const std::string& body_text, bool chat,
                      std::shared_ptr<Protocol> proto);
  // server_embeddings.cpp: /v1/embeddings and Ollama's /api/embed over one engine path.
  struct EmbeddingResult {
    std::vector<std::vector<float>> vectors;  // normalized, in input order
    bool base64 = false;
    int64_t prompt_tokens = 0;
    double seconds = 0;  // arrival to the last vector
  };
  // Runs an OpenAI embeddings body; false when it has answered already (an error in `shape`).
  bool run_embeddings(httplib::Response& res, const nlohmann::json& body,
                      ErrorShape shape, EmbeddingResult* out);
  void handle_embeddings(const httplib::Request& req, httplib::Response& res);
  void handle_route_key(const httplib::Request& req, httplib::Response& res);  // server_route_key.cpp
  // GET /slots and POST /slots/{id}?action=save|restore|erase (server_slots.cpp).
  void routes_slots();
  void handle_slot_action(const httplib::Request& req, httplib::Response& res);
  void handle_ollama_embed(const httplib::Request& req, httplib::Response& res);

  std::shared_ptr<const Program> program_;
  ServerOptions opt_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Metrics metrics_;
  std::unique_ptr<Engine> engine_;
  ModelInfo model_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{true};  // the listener thread has returned (or never started)
  int64_t created_ = 0;
  std::atomic<uint64_t> next_id_{1};
  int listen_fd_ = -1;  // the listening socket (set while binding)
  std::atomic<int> open_streams_{0};  // streaming responses not yet finished
};

// Constant-time comparison of a presented key with the expected one (time depends only on
// the expected key's length).
bool keys_equal(const std::string& presented, const std::string& expected);
// The credentials of an "Authorization: Bearer KEY" header, the scheme in any case; "" if none.
std::string bearer_token(const std::string& authorization);
// Whether --cors-origin lets `origin` call (an exact origin, or "*").
bool cors_allows(const std::vector<std::string>& origins, const std::string& origin);

}  // namespace ptn::serve
