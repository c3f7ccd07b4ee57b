// The chat page's routes: GET / and GET /webui/<file>, served from the embedded files with
// their type, a strong ETag (304 on If-None-Match), revalidation on every load and the
// page's Content-Security-Policy. `ptn serve --no-webui` leaves them out (then / is a 404).
#include <httplib.h>

#include <cstdio>

#include "serve/server.h"
#include "serve/webui.h"

namespace ptn::serve {

const char* const kWebContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const WebFile* web_file_for_path(std::string_view path) {
  std::string_view name;
  if (path == "/") {
    name = "index.html";
  } else if (path.size() > 7 && path.substr(0, 7) == "/webui/") {
    name = path.substr(7);
  } else {
    return nullptr;
  }
  for (const WebFile& f : web_files())
    if (name == f.name) return &f;
  return nullptr;
}

std::string web_content_type(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";  // (not reached: CMakeLists.txt admits only the types above)
}

namespace {

// FNV-1a over the bytes: the file's version for ETag (it changes when the build's file does).
std::string etag_of(const WebFile& f) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < f.size; ++i) h = (h ^ f.data[i]) * 1099511628211ull;
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

void Server::routes_webui() {
  httplib::Server& s = *http_;
  for (const WebFile& f : web_files()) {
    const std::string path = std::string(f.name) == "index.html" ? "/" : "/webui/" + std::string(f.name);
    const std::string etag = etag_of(f), type = web_content_type(f.name);
    const WebFile* file = &f;
    s.Get(path, [file, etag, type](const httplib::Request& req, httplib::Response& res) {
      res.set_header("ETag", etag);
      res.set_header("Cache-Control", "no-cache");  // revalidate each load: a new build shows at once
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy", kWebContentSecurityPolicy);
      res.set_header("Referrer-Policy", "no-referrer");
      res.set_header("X-Frame-Options", "DENY");
      if (req.get_header_value("If-None-Match") == etag) {
        res.status = 304;
        return;
      }
      res.set_content(reinterpret_cast<const char*>(file->data), file->size, type);
    });
  }
}

bool Server::is_webui_path(const std::string& path) const { return opt_.webui && web_file_for_path(path) != nullptr; }

}  // namespace ptn::serve
