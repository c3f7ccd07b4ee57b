// `ptn chat`: an interactive chat with a .ptn program on stdin/stdout (generate/chat_session.h
// renders the conversation with the model's chat template and reuses the cached prefix).
// One line is one user message; a line ending in '\' continues on the next line. Commands:
//   /reset          start over (the --system message stays)
//   /undo [N]       drop the last N exchanges (default 1) and rewind the cache to match
//   /save FILE      write the conversation as a JSON array of {"role", "content"} messages
//   /load FILE      read such a file (or {"messages": [...]}), render it and feed it
//   /quit           end (so does end of input)
// --save FILE writes the conversation and the cache's full KV blocks at the end (a KV record,
// kvcache/kv_record.h); --load FILE restores them at the start, so the saved prompt is not
// computed again.
// A line starting with "//" sends the text after the first '/'. Replies go to stdout, one per
// turn followed by a newline; notices and per-turn statistics go to stderr. With stdin not a
// terminal (a pipe or a file) nothing but the replies is written to stdout.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/file.h"
#include "core/text.h"
#include "generate/chat_session.h"
#include "runtime/kv_state.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

constexpr size_t kMaxMessageBytes = 1u << 20;
constexpr size_t kMaxConversationFile = 64u << 20;

struct ChatArgs {
  std::string model, system, template_file;
  std::string save_file, load_file;  // --save / --load: KV records (docs/kv-format.md)
  int64_t ctx = 0, n_predict = 0;
  int threads = 0;
  bool no_repack = false;
  ptn::cli::CacheFlags cache;
  ptn::cli::SamplingFlags sampling;
  bool print_ids = false;
  bool no_bos_stop = false;
  bool parse_special = false;
  ptn::gen::LookupOptions lookup;
  ptn::cli::DraftFlags draft;
};

// Reads one message: a line, joined with the next while it ends in '\'. Returns false at end
// of input with nothing read. A message longer than kMaxMessageBytes is an error (the rest of
// it is skipped).
bool read_message(std::FILE* in, std::string* out, bool* too_long) {
  out->clear();
  *too_long = false;
  bool any = false;
  while (true) {
    int c = std::fgetc(in);
    if (c == EOF) return any;
    any = true;
    if (c == '\n') {
      if (!out->empty() && out->back() == '\\') {
        out->back() = '\n';
        continue;
      }
      if (!out->empty() && out->back() == '\r') out->pop_back();
      return true;
    }
    if (out->size() >= kMaxMessageBytes) {
      *too_long = true;
      continue;
    }
    out->push_back(static_cast<char>(c));
  }
}

// The count of /undo: empty means 1; otherwise a decimal number 1..1000000.
int64_t parse_count(const std::string& arg) {
  if (arg.empty()) return 1;
  if (arg.size() > 7 || arg.find_first_not_of("0123456789") != std::string::npos)
    ptn::fail(ptn::ErrorKind::InvalidArgument, "/undo", "expected a number of exchanges, got '" + arg.substr(0, 20) + "'");
  return std::stoll(arg);
}

void save_conversation(const ptn::ChatSession& chat, const std::string& path) {
  if (path.empty()) ptn::fail(ptn::ErrorKind::InvalidArgument, "/save", "expected a file name");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) ptn::fail(ptn::ErrorKind::Io, path, "cannot open for writing");
  f << chat.messages().dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";  // bad UTF-8 -> U+FFFD
  f.close();
  if (!f) ptn::fail(ptn::ErrorKind::Io, path, "write failed");
}

void load_conversation(ptn::ChatSession& chat, const std::string& path) {
  if (path.empty()) ptn::fail(ptn::ErrorKind::InvalidArgument, "/load", "expected a file name");
  const std::string text = ptn::read_text_file(path, kMaxConversationFile);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ptn::fail(ptn::ErrorKind::Corrupt, path, std::string("invalid JSON: ") + e.what());
  }
  chat.load(j, path);
}

// --save: the session's tokens and full blocks, with the conversation as the record's meta.
void save_session(const ptn::Session& session, const ptn::ChatSession& chat, const std::string& path) {
  ptn::kv::KvRecord rec = session.save_kv();
  rec.meta = chat.messages().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  ptn::write_kv_file(path, rec);
  std::fprintf(stderr, "ptn chat: saved %zu messages, %zu tokens and %zu KV blocks to %s\n", chat.messages().size(),
               rec.tokens.size(), rec.blocks.size(), path.c_str());
}

// --load: restore the blocks (identity checked), then load the conversation over them, so only
// what the blocks do not cover is computed.
void load_session(ptn::Session& session, ptn::ChatSession& chat, const std::string& path) {
  const ptn::kv::KvRecord rec = ptn::read_kv_file(path);
  nlohmann::ordered_json conv;
  try {
    conv = nlohmann::ordered_json::parse(rec.meta);
  } catch (const nlohmann::json::exception& e) {
    ptn::fail(ptn::ErrorKind::Corrupt, path, std::string("the conversation in the file is not JSON: ") + e.what());
  }
  const int64_t n = session.restore_kv(rec, path);
  chat.adopt_cache(std::vector<int32_t>(rec.tokens.begin(), rec.tokens.begin() + n));
  chat.load(conv, path);
  std::fprintf(stderr, "ptn chat: loaded %zu messages from %s (%zu tokens, %lld from its KV blocks)\n",
               chat.messages().size(), path.c_str(), chat.cached_tokens().size(), static_cast<long long>(n));
}

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* c = app.add_subcommand("chat", "Chat with a .ptn program on stdin/stdout using its chat template");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), a->model, "the .ptn program")->required();
  c->add_option(opt("system"), a->system, "a system message that starts the conversation");
  c->add_option(opt("chat-template"), a->template_file,
                "a Jinja chat template file to use instead of the program's");
  c->add_option(opt("n-predict", "n"), a->n_predict, "most tokens per reply (default 0: until the model ends it)");
  ptn::cli::add_sampling_flags(c, &a->sampling);
  ptn::cli::add_threads_flag(c, &a->threads);
  ptn::cli::add_repack_flag(c, &a->no_repack);
  ptn::cli::add_context_flag(c, &a->ctx);
  ptn::cli::add_cache_flags(c, &a->cache);
  c->add_option(opt("save"), a->save_file,
                "at the end, write the conversation and its KV cache blocks to this file (docs/kv-format.md)");
  c->add_option(opt("load"), a->load_file,
                "start from a file --save wrote: its conversation, with the saved blocks instead of recomputing "
                "them (refused when written by another program, cache dtype or block size)");
  c->add_flag(opt("print-ids"), a->print_ids, "print each reply's token ids to stderr as a JSON array");
  c->add_flag(opt("ignore-bos-stop"), a->no_bos_stop, "keep generating when the model emits BOS");
  c->add_flag(opt("parse-special"), a->parse_special,
              "let typed text contain control tokens (e.g. <|im_end|>); off: what you type is always text");
  ptn::cli::add_lookup_flags(c, &a->lookup);
  ptn::cli::add_draft_flags(c, &a->draft);
  return [a] {
    using namespace ptn;
    ptn::gen::check_lookup_options(a->lookup, "--lookup-draft/--lookup-ngram");
    cli::apply_threads_flag(a->threads);
    cli::apply_repack_flag(a->no_repack);
    if (a->n_predict < 0) fail(ErrorKind::InvalidArgument, "--n-predict", "must be >= 0");
    auto program = cli::load_model("chat", a->model);
    if (!program->meta().tokenizer)
      fail(ErrorKind::InvalidArgument, a->model, "the program has no tokenizer: export it with one");
    const TokenizerSpec& ts = *program->meta().tokenizer;
    auto tok = Tokenizer::create(ts);
    SessionOptions so;
    cli::apply_cache_flags(a->cache, &so);
    so.context = a->ctx;
    Session session(program, so);

    ChatConfig cc;
    cc.chat_template = a->template_file.empty() ? ts.chat_template : read_text_file(a->template_file, 1u << 20);
    cc.bos_token = ts.bos_token;
    cc.eos_token = ts.eos_token;
    cc.system = a->system;
    cc.max_reply_tokens = a->n_predict;
    cc.stop = cli::stop_from_flags(a->sampling);
    cc.stop_at_bos = !a->no_bos_stop;
    cc.parse_special = a->parse_special;
    cc.lookup = a->lookup;
    cc.drafter = cli::make_drafter(a->draft, a->lookup, *tok, so,
                                   [](const std::string& path) { return cli::load_model("chat", path); });
    cc.draft_max = a->draft.max;
    ChatSession chat(session, *tok, cc, cli::sampling_from_flags(a->sampling, program->meta().spec.vocab_size));

    if (!a->load_file.empty()) load_session(session, chat, a->load_file);
    const bool interactive = ::isatty(STDIN_FILENO) != 0;
    if (chat.uses_fallback())
      std::fprintf(stderr,
                   "ptn chat: the model has no chat template; using the plain format \"User: ...\\nAssistant:\"\n");
    if (interactive)
      std::fprintf(stderr,
                   "ptn chat: context %lld tokens. Commands: /reset, /undo [N], /save FILE, /load FILE, /quit; "
                   "end a line with \\ to continue it.\n",
                   static_cast<long long>(session.context()));
    std::string line;
    bool too_long = false;
    while (true) {
      if (interactive) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
      }
      if (!read_message(stdin, &line, &too_long)) break;
      if (too_long) {
        std::fprintf(stderr, "ptn chat: message longer than %zu bytes, not sent\n", kMaxMessageBytes);
        continue;
      }
      try {
        if (line.size() >= 1 && line[0] == '/' && !(line.size() >= 2 && line[1] == '/')) {
          const size_t sp_at = line.find(' ');
          const std::string cmd = line.substr(0, sp_at);
          const std::string arg = sp_at == std::string::npos ? "" : text::trim(line.substr(sp_at + 1));
          if (cmd == "/quit" || cmd == "/exit") break;
          if (cmd == "/reset") {
            chat.reset();
            std::fprintf(stderr, "ptn chat: conversation reset\n");
          } else if (cmd == "/undo") {
            const int64_t n = chat.undo(parse_count(arg));
            std::fprintf(stderr, "ptn chat: dropped %lld exchange%s; %zu tokens stay cached\n", static_cast<long long>(n),
                         n == 1 ? "" : "s", chat.cached_tokens().size());
          } else if (cmd == "/save") {
            save_conversation(chat, arg);
            std::fprintf(stderr, "ptn chat: saved %zu messages to %s\n", chat.messages().size(), arg.c_str());
          } else if (cmd == "/load") {
            load_conversation(chat, arg);
            std::fprintf(stderr, "ptn chat: loaded %zu messages from %s (%zu tokens)\n", chat.messages().size(),
                         arg.c_str(), chat.cached_tokens().size());
          } else {
            std::fprintf(stderr, "ptn chat: unknown command '%s' (/reset, /undo [N], /save FILE, /load FILE, /quit)\n",
                         cmd.substr(0, 40).c_str());
          }
          continue;
        }
        // Invalid UTF-8 typed here becomes U+FFFD (one per maximal ill-formed subpart) before it
        // joins the conversation, so the model sees what /save writes (its replace handler
        // substitutes the same way) and a saved conversation /loads back to the same prompt.
        // Kept for that, not as a guard: /save's dump with error_handler_t::replace never throws
        // on bad UTF-8 (test_text_cli ChatInvalidUtf8BecomesReplacementOnEntry).
        const std::string text = ptn::tok::sanitize_utf8(line.rfind("//", 0) == 0 ? line.substr(1) : line);
        if (text::trim(text).empty()) continue;
        ChatReply r = chat.send(text, [](const std::string& piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        });
        std::fputc('\n', stdout);
        std::fflush(stdout);
        std::fprintf(stderr, "[prompt %lld tokens (%lld run, %lld from the cache), reply %lld tokens, stop: %s]\n",
                     static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.fed_tokens),
                     static_cast<long long>(r.prompt_tokens - r.fed_tokens), static_cast<long long>(r.reply_tokens),
                     r.stop.c_str());
        if (cc.drafter || a->lookup.draft_tokens > 0)
          std::fprintf(stderr, "[speculation: %lld steps, %lld drafted, %lld accepted]\n",
                       static_cast<long long>(r.speculation.steps), static_cast<long long>(r.speculation.drafted),
                       static_cast<long long>(r.speculation.accepted));
        if (a->print_ids) {
          std::string ids = "[";
          for (size_t i = 0; i < r.tokens.size(); ++i) ids += (i ? ", " : "") + std::to_string(r.tokens[i]);
          std::fprintf(stderr, "reply ids: %s]\n", ids.c_str());
        }
      } catch (const std::exception& e) {  // reported; the conversation goes on
        std::fprintf(stderr, "ptn chat: %s\n", e.what());
      }
    }
    if (!a->save_file.empty()) save_session(session, chat, a->save_file);
    return 0;
  };
}

PTN_COMMAND("chat", setup);

}  // namespace
