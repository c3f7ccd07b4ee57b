// The browser chat page that `ptn serve` answers at "/" (docs/webui.md): the files of
// src/serve/webui, compiled into the binary by cmake/embed_files.cmake.
//
//   for (const WebFile& f : web_files()) ...          // f.name "index.html", f.data, f.size
//   const WebFile* f = web_file_for_path("/webui/app.js");  // nullptr: not a page path
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ptn::serve {

struct WebFile {
  const char* name;           // file name in src/serve/webui, e.g. "app.js"
  const unsigned char* data;  // its bytes (size of them)
  size_t size;
};

// Every embedded file (generated at build time).
std::span<const WebFile> web_files();

// The file a GET of `path` serves: "/" is index.html, "/webui/<name>" the file <name>; nullptr
// for any other path.
const WebFile* web_file_for_path(std::string_view path);

// The Content-Type of an embedded file, from its extension (the build admits only these).
std::string web_content_type(std::string_view name);

// The Content-Security-Policy sent with the page: scripts, styles and requests only from the
// server itself, no inline script, no frames, no plugins.
extern const char* const kWebContentSecurityPolicy;

}  // namespace ptn::serve
