// llama-server's slot endpoints over the engine's slots (serve/engine.h, SlotOp):
//   GET  /slots                                      each slot: id, is_processing, n_tokens
//   POST /slots/{id}?action=save    {"filename": F}  its tokens and cached full blocks -> DIR/F
//   POST /slots/{id}?action=restore {"filename": F}  DIR/F -> blocks into the prefix cache
//   POST /slots/{id}?action=erase                    its blocks leave the cache
// DIR is --slot-save-path; without it save and restore answer 501. The file is a KV record
// (docs/kv-format.md): restore refuses one of another program, cache dtype or block size.
// File I/O runs on the HTTP thread; only the cache work runs on the engine thread.
#include <httplib.h>

#include <cctype>
#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "runtime/kv_state.h"
#include "serve/api.h"
#include "serve/server.h"

namespace ptn::serve {

using json = nlohmann::json;

bool valid_slot_filename(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

void Server::routes_slots() {
  httplib::Server& s = *http_;
  s.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    json a = json::array();
    for (const SlotView& v : engine_->slots())
      a.push_back({{"id", v.id}, {"n_ctx", engine_->context()}, {"is_processing", v.processing}, {"n_tokens", v.tokens}});
    res.set_content(dump(a), "application/json");
  });
  s.Post(R"(/slots/([^/]*))", [this](const httplib::Request& req, httplib::Response& res) { handle_slot_action(req, res); });
}

void Server::handle_slot_action(const httplib::Request& req, httplib::Response& res) {
  if (body_too_large(req, res, opt_.max_body_bytes)) return;
  const auto t0 = std::chrono::steady_clock::now();
  auto ms_since = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  try {
    const std::string id_text = req.matches[1];
    if (id_text.empty() || id_text.size() > 6 || id_text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(id_text) >= engine_->n_slots())
      throw ApiError(400, "invalid_request_error",
                     "'id_slot': no slot '" + id_text.substr(0, 32) + "' (this server has 0.." +
                         std::to_string(engine_->n_slots() - 1) + ", --parallel)",
                     "id_slot");
    const int id = static_cast<int>(std::stoll(id_text));
    const std::string action = req.has_param("action") ? req.get_param_value("action") : "";
    SlotOp op;
    if (action == "save") op = SlotOp::Save;
    else if (action == "restore") op = SlotOp::Restore;
    else if (action == "erase") op = SlotOp::Erase;
    else
      throw ApiError(400, "invalid_request_error",
                     "'action': must be save, restore or erase, got '" + action.substr(0, 32) + "'", "action");

    std::string filename;
    json body = json::object();
    if (!req.body.empty()) body = parse_body(req.body);
    if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the body must be a JSON object", "");
    for (auto it = body.begin(); it != body.end(); ++it)
      if (it.key() != "filename" || op == SlotOp::Erase)
        throw ApiError(400, "invalid_request_error", "'" + it.key().substr(0, 64) + "': unknown field for " + action,
                       it.key().substr(0, 64));
    if (op != SlotOp::Erase) {
      if (opt_.slot_save_path.empty())
        throw ApiError(501, "not_supported_error", "slot " + action + " needs the server started with --slot-save-path DIR",
                       "");
      if (!body.contains("filename") || !body["filename"].is_string())
        throw ApiError(400, "invalid_request_error", "'filename': must be a string", "filename");
      filename = body["filename"].get<std::string>();
      if (!valid_slot_filename(filename))
        throw ApiError(400, "invalid_request_error",
                       "'filename': must be 1..128 characters of A-Z a-z 0-9 . _ - and not start with '.'", "filename");
    }
    const std::string path = (std::filesystem::path(opt_.slot_save_path) / filename).string();

    std::shared_ptr<const kv::KvRecord> record;
    uint64_t read_bytes = 0;
    if (op == SlotOp::Restore) {
      const kv::KvIdentity& want = engine_->kv_identity();
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec))
        throw ApiError(404, "invalid_request_error", "'filename': no saved slot '" + filename + "'", "filename");
      // No larger than a record of this server's whole context can be.
      const uint64_t bs = static_cast<uint64_t>(want.block_size);
      const uint64_t blocks = static_cast<uint64_t>(engine_->context()) / bs;
      const uint64_t limit = (blocks + 1) * (kv::block_data_bytes(want, "slot restore") + bs * 4 + 64) +
                             static_cast<uint64_t>(engine_->context()) * 4 + kv::RecordLimits::kMaxMeta + 4096;
      read_bytes = std::filesystem::file_size(path, ec);
      if (ec) throw ApiError(500, "server_error", "cannot read '" + filename + "': " + ec.message(), "filename");
      if (read_bytes > limit)
        throw ApiError(400, "invalid_request_error",
                       "'" + filename + "' holds " + std::to_string(read_bytes) +
                           " bytes, more than a slot of this server can (" + std::to_string(limit) + ")",
                       "filename");
      kv::KvRecord r;
      try {
        r = read_kv_file(path);
        kv::check_identity(r.id, want, filename);
      } catch (const Error& e) {
        throw ApiError(400, "invalid_request_error", "'" + filename + "' cannot be restored here: " + e.detail(),
                       "filename");
      }
      record = std::make_shared<const kv::KvRecord>(std::move(r));
    }

    auto abandoned = std::make_shared<std::atomic<bool>>(false);
    std::future<SlotResult> f = engine_->slot_action(op, id, record, abandoned);
    // The action waits for the request running in the slot, at most as long as a request may take.
    if (f.wait_for(std::chrono::seconds(opt_.request_timeout_s)) != std::future_status::ready) {
      abandoned->store(true);
      throw ApiError(503, "server_error", "slot " + std::to_string(id) + " stayed busy for " +
                                              std::to_string(opt_.request_timeout_s) + " s; nothing was done", "");
    }
    SlotResult r = f.get();
    json out = {{"id_slot", id}};
    switch (op) {
      case SlotOp::Save: {
        const uint64_t written = write_kv_file(path, *r.record);
        out["filename"] = filename;
        out["n_saved"] = r.kv_tokens;
        out["n_tokens"] = r.tokens;
        out["n_written"] = written;
        out["timings"] = {{"save_ms", ms_since()}};
        break;
      }
      case SlotOp::Restore:
        out["filename"] = filename;
        out["n_restored"] = r.kv_tokens;
        out["n_tokens"] = r.tokens;
        out["n_read"] = read_bytes;
        out["timings"] = {{"restore_ms", ms_since()}};
        break;
      case SlotOp::Erase:
        out["n_erased"] = r.tokens;
        out["n_freed"] = r.kv_tokens;
        break;
    }
    res.set_content(dump(out), "application/json");
  } catch (const ApiError& e) {
    send_error(res, e.status, e.type, e.what(), e.param, e.code);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Capacity) {
      send_error(res, 503, "server_error", e.detail());
    } else if (e.kind() == ErrorKind::Unsupported) {
      send_error(res, 501, "not_supported_error", e.what());
    } else if (e.kind() == ErrorKind::Io) {
      send_error(res, 500, "server_error", e.what());
    } else {
      send_error(res, 400, "invalid_request_error", e.what(), e.where() == "id_slot" ? "id_slot" : "");
    }
  }
}

}  // namespace ptn::serve
