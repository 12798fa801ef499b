#include "kvgate/admin/status_page.hpp"

#include <algorithm>
#include <cstdio>

namespace kvgate::admin {

namespace {

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

template <class T>
std::string or_dash(const std::optional<T>& value, const char* pattern = "%.0f") {
  return value ? format(pattern, static_cast<double>(*value)) : std::string("–");
}

// "12 s ago" style ages: the operator reads the page, not a log.
std::string age(std::uint64_t now_ms, std::uint64_t then_ms) {
  const double seconds = now_ms > then_ms ? static_cast<double>(now_ms - then_ms) / 1000.0 : 0.0;
  if (seconds < 100) {
    return format("%.0f s ago", seconds);
  }
  if (seconds < 6'000) {
    return format("%.0f min ago", seconds / 60);
  }
  return format("%.1f h ago", seconds / 3'600);
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? std::string("–")
                    : format("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

void cell(std::string& html, std::string_view text, std::string_view css_class = {}) {
  html += css_class.empty() ? "<td>" : "<td class=\"" + std::string(css_class) + "\">";
  html += html_escape(text);
  html += "</td>";
}

void header_row(std::string& html, std::initializer_list<std::string_view> names) {
  html += "<thead><tr>";
  for (auto name : names) {
    html += "<th>";
    html += name;  // the page's own words
    html += "</th>";
  }
  html += "</tr></thead>";
}

// One bar per bucket, its height the share of prompt tokens the engines
// reported cached; an empty bucket is a gap, not a zero.
void hit_chart(std::string& html, const StatusView& view) {
  constexpr int kWidth = 600;
  constexpr int kHeight = 90;
  const auto buckets = view.hit_buckets.size();
  html += "<svg id=\"hit-chart\" role=\"img\" aria-label=\"Prompt tokens cached per interval\" viewBox=\"0 0 " +
          std::to_string(kWidth) + " " + std::to_string(kHeight + 14) + "\" width=\"" + std::to_string(kWidth) +
          "\" height=\"" + std::to_string(kHeight + 14) + "\">";
  html += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(kWidth) + "\" height=\"" + std::to_string(kHeight) +
          "\" class=\"plot\"/>";
  for (int line : {25, 50, 75}) {
    const int y = kHeight - kHeight * line / 100;
    html += "<line x1=\"0\" x2=\"" + std::to_string(kWidth) + "\" y1=\"" + std::to_string(y) + "\" y2=\"" +
            std::to_string(y) + "\" class=\"grid\"/>";
  }
  if (buckets > 0) {
    const double slot = static_cast<double>(kWidth) / static_cast<double>(buckets);
    for (std::size_t at = 0; at < buckets; ++at) {
      const auto& bucket = view.hit_buckets[at];
      if (bucket.prompt_tokens == 0) {
        continue;
      }
      const double ratio = static_cast<double>(bucket.cached_tokens) / static_cast<double>(bucket.prompt_tokens);
      const double height = std::max(1.0, ratio * kHeight);
      html += "<rect class=\"bar\" x=\"" + format("%.1f", slot * static_cast<double>(at) + 1) + "\" y=\"" +
              format("%.1f", kHeight - height) + "\" width=\"" + format("%.1f", std::max(1.0, slot - 2)) +
              "\" height=\"" + format("%.1f", height) + "\"><title>" + format("%.1f%%", ratio * 100) + " of " +
              std::to_string(bucket.prompt_tokens) + " prompt tokens, " + std::to_string(bucket.requests) +
              " requests</title></rect>";
    }
  }
  const double minutes = static_cast<double>(view.bucket_ms * buckets) / 60'000.0;
  html += "<text x=\"0\" y=\"" + std::to_string(kHeight + 12) + "\">" + format("%.0f min ago", minutes) +
          "</text><text x=\"" + std::to_string(kWidth) + "\" y=\"" + std::to_string(kHeight + 12) +
          "\" text-anchor=\"end\">now</text></svg>";
}

constexpr std::string_view kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em 2em;color:#1d2330;background:#fbfbfd}
h1{font-size:20px;margin:0 0 .2em}h2{font-size:16px;margin:1.4em 0 .4em}
.meta{color:#5a6275}.kpis{display:flex;gap:2.5em;margin:.8em 0}.kpi b{display:block;font-size:22px}
table{border-collapse:collapse;min-width:50%}th,td{padding:3px 10px;border-bottom:1px solid #e3e6ee;text-align:left;white-space:nowrap}
th{background:#eef1f7;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#11703a;font-weight:600}.bad{color:#b3261e;font-weight:600}.warn{color:#9a6700;font-weight:600}
svg .plot{fill:#fff;stroke:#d5d9e3}svg .grid{stroke:#eceff5}svg .bar{fill:#3a6fd8}svg text{font-size:11px;fill:#5a6275}
.empty{color:#5a6275;font-style:italic}
)";

}  // namespace

std::string render_status_page(const StatusView& view) {
  std::string html;
  html.reserve(16'384);
  html += "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"";
  html += std::to_string(view.refresh_seconds);
  html += "\"><title>kvgate status</title><style>";
  html += kStyle;
  html += "</style></head><body>";
  html += "<h1>kvgate</h1><div class=\"meta\">version " + html_escape(view.version) + " · policy " +
          html_escape(view.policy) + (view.draining ? " · <span class=\"warn\">draining</span>" : "") +
          " · refreshes every " + std::to_string(view.refresh_seconds) + " s</div>";

  std::size_t healthy = 0;
  for (const auto& worker : view.workers) {
    healthy += worker.healthy && !worker.ejected ? 1 : 0;
  }
  std::uint64_t prompt = 0;
  std::uint64_t cached = 0;
  std::uint64_t requests = 0;
  for (const auto& bucket : view.hit_buckets) {
    prompt += bucket.prompt_tokens;
    cached += bucket.cached_tokens;
    requests += bucket.requests;
  }
  const double window_minutes = static_cast<double>(view.bucket_ms * view.hit_buckets.size()) / 60'000.0;
  html += "<div class=\"kpis\"><div class=\"kpi\" id=\"kpi-workers\"><b>" + std::to_string(healthy) + " / " +
          std::to_string(view.workers.size()) + "</b>workers routable</div>";
  html += "<div class=\"kpi\" id=\"kpi-hit\"><b>" + percent(cached, prompt) + "</b>prompt tokens cached, last " +
          format("%.0f", window_minutes) + " min</div>";
  html += "<div class=\"kpi\"><b>" + std::to_string(requests) + "</b>requests with engine usage, last " +
          format("%.0f", window_minutes) + " min</div></div>";

  html += "<h2>Prefix-cache hits over time</h2>";
  hit_chart(html, view);

  // A role column only for a fleet that has disaggregated workers.
  const bool roles = std::any_of(view.workers.begin(), view.workers.end(),
                                 [](const WorkerRow& worker) { return !worker.role.empty(); });
  html += "<h2>Workers</h2><table id=\"workers\">";
  if (roles) {
    header_row(html, {"worker", "model", "role", "state", "index mode", "KV events", "in flight", "engine running",
                      "engine waiting", "KV used", "recent TTFT", "TTFT / expected", "index blocks"});
  } else {
    header_row(html, {"worker", "model", "state", "index mode", "KV events", "in flight", "engine running",
                      "engine waiting", "KV used", "recent TTFT", "TTFT / expected", "index blocks"});
  }
  html += "<tbody>";
  for (const auto& worker : view.workers) {
    html += "<tr>";
    cell(html, worker.id);
    cell(html, worker.model);
    if (roles) {
      cell(html, worker.role.empty() ? "both" : worker.role);
    }
    const std::string state = !worker.healthy   ? "down"
                              : worker.ejected  ? "ejected"
                              : worker.drifting ? "drifting"
                                                : "up";
    cell(html, state, state == "up" ? "ok" : state == "drifting" ? "warn" : "bad");
    cell(html, worker.mode, worker.mode == "stale" ? "warn" : "");
    cell(html, worker.events, worker.events == "connected" || worker.events == "none" ? "" : "warn");
    cell(html,
         std::to_string(worker.in_flight) +
             (worker.peer_in_flight > 0 ? " (+" + std::to_string(worker.peer_in_flight) + " peers)" : std::string()),
         "num");
    cell(html, or_dash(worker.engine_running), "num");
    cell(html, or_dash(worker.engine_waiting), "num");
    cell(html, worker.kv_usage ? format("%.0f%%", *worker.kv_usage * 100) : "–", "num");
    cell(html, worker.recent_ttft_ms ? format("%.0f ms", *worker.recent_ttft_ms) : "–", "num");
    // Realized first tokens over the router's expectation: median (p90).
    cell(html,
         worker.ttft_ratio_p50 ? format("%.2f×", *worker.ttft_ratio_p50) + " (p90 " +
                                     format("%.2f×", worker.ttft_ratio_p90.value_or(0)) + ")"
                               : "–",
         "num");
    cell(html, std::to_string(worker.index_blocks), "num");
    html += "</tr>";
  }
  html += "</tbody></table>";

  if (view.cluster) {
    const auto& cluster = *view.cluster;
    html += "<h2>Cluster</h2><p class=\"meta\">replica " + html_escape(cluster.replica_id) + " · " +
            html_escape(cluster.engine) + " stream " + html_escape(cluster.stream) + " · ";
    html += cluster.connected ? "<span class=\"ok\">connected</span>"
                              : "<span class=\"bad\">cut off: routing on this replica's own state</span>";
    html += " · published " + std::to_string(cluster.published) + ", applied " + std::to_string(cluster.applied) +
            ", dropped " + std::to_string(cluster.dropped) + "</p>";
    if (cluster.peers.empty()) {
      html += "<p class=\"empty\">No peer heard from.</p>";
    } else {
      html += "<table id=\"peers\">";
      header_row(html, {"peer", "state", "last heard", "lag", "applied", "dropped", "in flight"});
      html += "<tbody>";
      for (const auto& peer : cluster.peers) {
        html += "<tr>";
        cell(html, peer.id);
        cell(html, peer.live ? "live" : "silent", peer.live ? "ok" : "warn");
        cell(html, age(view.now_ms, peer.last_heard_ms));
        cell(html, format("%.0f ms", peer.last_lag_ms), "num");
        cell(html, std::to_string(peer.applied), "num");
        cell(html, std::to_string(peer.dropped), "num");
        cell(html, std::to_string(peer.in_flight), "num");
        html += "</tr>";
      }
      html += "</tbody></table>";
    }
  }

  html += "<h2>Recent decisions</h2>";
  if (view.recent.empty()) {
    html += "<p class=\"empty\">No routed request yet.</p>";
  } else {
    html += "<table id=\"decisions\">";
    header_row(html, {"finished", "request", "model", "worker", "reason", "session", "prompt tokens",
                      "predicted cached", "engine cached", "TTFT", "status"});
    html += "<tbody>";
    for (const auto& request : view.recent) {
      html += "<tr>";
      cell(html, age(view.now_unix_ms, request.unix_ms));
      // Ids are up to 128 bytes; the head tells them apart on one screen.
      const auto id = request.request_id.view();
      cell(html, id.size() > 16 ? std::string(id.substr(0, 16)) + "…" : std::string(id));
      cell(html, request.model.view());
      // A disaggregated request names its prefill worker beside its decoder.
      cell(html,
           request.prefill_worker.view().empty()
               ? std::string(request.worker.view())
               : std::string(request.worker.view()) + " (prefill: " + std::string(request.prefill_worker.view()) + ")");
      cell(html, request.reason.view());
      cell(html, request.session.view().empty() ? "–" : request.session.view());
      cell(html, request.prompt_tokens ? std::to_string(*request.prompt_tokens) : std::to_string(request.input_tokens),
           "num");
      cell(html, std::to_string(request.predicted_cached_tokens), "num");
      cell(html, or_dash(request.cached_tokens), "num");
      cell(html, request.ttft_ms ? format("%.0f ms", *request.ttft_ms) : "–", "num");
      cell(html, std::to_string(request.status),
           request.status >= 500   ? "bad"
           : request.status >= 400 ? "warn"
                                   : "num");
      html += "</tr>";
    }
    html += "</tbody></table>";
  }

  html += "<h2>Most recently active sessions</h2>";
  if (view.sessions.empty()) {
    html += "<p class=\"empty\">No session within its idle time.</p>";
  } else {
    html += "<table id=\"sessions\">";
    header_row(html, {"session", "turns", "worker", "last seen", "last reason", "last prompt tokens", "last cached"});
    html += "<tbody>";
    for (const auto& session : view.sessions) {
      html += "<tr>";
      cell(html, session.key.size() > 48 ? session.key.substr(0, 45) + "…" : session.key);
      cell(html, std::to_string(session.state.turns), "num");
      cell(html, session.state.worker);
      cell(html, age(view.now_ms, session.state.last_seen_ms));
      const auto& turn = session.last_turn;
      cell(html, turn ? std::string(policy::to_string(turn->reason)) : "–");
      cell(html, turn ? or_dash(turn->prompt_tokens) : "–", "num");
      cell(html, turn ? or_dash(turn->cached_tokens) : "–", "num");
      html += "</tr>";
    }
    html += "</tbody></table>";
  }
  html +=
      "<p class=\"meta\">JSON: <a href=\"/debug/workers\">/debug/workers</a> · metrics: <a "
      "href=\"/metrics\">/metrics</a></p></body></html>";
  return html;
}

}  // namespace kvgate::admin
