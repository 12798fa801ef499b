#pragma once
// Text for HTML pages kvgate writes (the admin status page, kvgate-bench's
// reports): every text that came from a client, an engine, a workload file
// or the configuration goes through here.
#include <string>
#include <string_view>

namespace kvgate {

// Escapes & < > " ' (safe in element content and in quoted attributes);
// bytes that are not UTF-8 become U+FFFD, so a page never carries them.
std::string html_escape(std::string_view text);

}  // namespace kvgate
