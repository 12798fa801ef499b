// The HTML reports: the Markdown report's figures as inline SVG charts, no
// scripts and no external files, so they open anywhere (and render the same
// in a headless browser, scripts/report_screenshot.sh). Every chart is a
// <figure data-chart=NAME> so a check can tell which ones are present.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>

#include "kvgate/core/html.hpp"
#include "report.hpp"

#include "kvgate/core/html.hpp"

namespace kvgate::load {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 8> kColours = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                 "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
constexpr double kWidth = 720;
constexpr double kHeight = 320;
constexpr double kLeft = 64;
constexpr double kRight = 16;
constexpr double kTop = 16;
constexpr double kBottom = 44;

std::string number(double value, const char* pattern = "%.1f") {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), pattern, value);
  return buffer.data();
}

// A tick label: few digits, whatever the magnitude.
std::string tick(double value) {
  if (value == 0) {
    return "0";
  }
  if (std::fabs(value) >= 1000) {
    return number(value / 1000, std::fabs(value) >= 10000 ? "%.0fk" : "%.1fk");
  }
  return number(value, std::fabs(value) >= 10 ? "%.0f" : (std::fabs(value) >= 1 ? "%.1f" : "%.2f"));
}

std::string escape(const std::string& text) {
  return html_escape(text);
}

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // x, y
};

struct Axis {
  std::string label;
  double low = 0;
  double high = 1;
  bool log = false;
  double scale = 1;  // tick labels show value x scale (100 for percentages)
  std::string unit;
};

class Plot {
 public:
  Plot(Axis x, Axis y, double width = kWidth, double height = kHeight)
      : x_(std::move(x)), y_(std::move(y)), width_(width), height_(height) {
    if (x_.log) {
      x_.low = std::max(x_.low, 1e-3);
      x_.high = std::max(x_.high, x_.low * 10);
    }
    if (x_.high <= x_.low) {
      x_.high = x_.low + 1;
    }
    if (y_.high <= y_.low) {
      y_.high = y_.low + 1;
    }
  }

  [[nodiscard]] double px(double x) const {
    const double width = width_ - kLeft - kRight;
    if (x_.log) {
      const double at = std::log10(std::max(x, x_.low));
      return kLeft + width * (at - std::log10(x_.low)) / (std::log10(x_.high) - std::log10(x_.low));
    }
    return kLeft + width * (x - x_.low) / (x_.high - x_.low);
  }
  [[nodiscard]] double py(double y) const {
    const double height = height_ - kTop - kBottom;
    return height_ - kBottom - height * (std::clamp(y, y_.low, y_.high) - y_.low) / (y_.high - y_.low);
  }

  [[nodiscard]] std::string frame() const {
    std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + number(width_) + "' height='" +
                      number(height_) + "' font-family='sans-serif'>";
    for (int step = 0; step <= 4; ++step) {
      const double value = y_.low + (y_.high - y_.low) * step / 4.0;
      const double y = py(value);
      svg += "<line x1='" + number(kLeft) + "' x2='" + number(width_ - kRight) + "' y1='" + number(y) + "' y2='" +
             number(y) + "' stroke='#ddd'/><text x='" + number(kLeft - 6) + "' y='" + number(y + 4) +
             "' text-anchor='end' font-size='11'>" + tick(value * y_.scale) + y_.unit + "</text>";
    }
    std::vector<double> ticks;
    if (x_.log) {
      for (double decade = std::pow(10, std::floor(std::log10(x_.low))); decade <= x_.high * 1.0001; decade *= 10) {
        for (double multiple : {1.0, 2.0, 5.0}) {
          if (decade * multiple >= x_.low && decade * multiple <= x_.high) {
            ticks.push_back(decade * multiple);
          }
        }
      }
    } else {
      for (int step = 0; step <= 5; ++step) {
        ticks.push_back(x_.low + (x_.high - x_.low) * step / 5.0);
      }
    }
    for (double value : ticks) {
      svg += "<text x='" + number(px(value)) + "' y='" + number(height_ - kBottom + 16) +
             "' text-anchor='middle' font-size='11'>" + tick(value * x_.scale) + x_.unit + "</text>";
    }
    svg += "<line x1='" + number(kLeft) + "' x2='" + number(width_ - kRight) + "' y1='" + number(height_ - kBottom) +
           "' y2='" + number(height_ - kBottom) + "' stroke='#444'/>";
    svg += "<text x='" + number((kLeft + width_ - kRight) / 2) + "' y='" + number(height_ - 8) +
           "' text-anchor='middle' font-size='12'>" + escape(x_.label) + "</text>";
    svg += "<text x='14' y='" + number(height_ / 2) + "' font-size='12' transform='rotate(-90 14 " +
           number(height_ / 2) + ")' text-anchor='middle'>" + escape(y_.label) + "</text>";
    return svg;
  }

  [[nodiscard]] std::string lines(const std::vector<Series>& series, bool markers = false) const {
    std::string svg = frame();
    for (std::size_t index = 0; index < series.size(); ++index) {
      const std::string colour = kColours[index % kColours.size()];
      std::string points;
      for (const auto& [x, y] : series[index].points) {
        points += number(px(x)) + "," + number(py(y)) + " ";
        if (markers) {
          svg += "<circle cx='" + number(px(x)) + "' cy='" + number(py(y)) + "' r='3' fill='" + colour + "'/>";
        }
      }
      svg += "<polyline fill='none' stroke-width='2' stroke='";
      svg += colour;
      svg += "' points='";
      svg += points;
      svg += "'/>";
    }
    return svg;
  }

 private:
  Axis x_;
  Axis y_;
  double width_;
  double height_;
};

// The series' names in their colours, as HTML so that long lists wrap.
std::string legend(const std::vector<Series>& series) {
  std::string html = "<div class='legend'>";
  for (std::size_t index = 0; index < series.size(); ++index) {
    html += "<span><i style='background:" + std::string(kColours[index % kColours.size()]) + "'></i>" +
            escape(series[index].name) + "</span>";
  }
  return html + "</div>";
}

std::string figure(const std::string& name, const std::string& title, const std::string& svg,
                   const std::string& caption = "", const std::vector<Series>& series = {}) {
  return "<figure data-chart='" + name + "'><h2>" + escape(title) + "</h2>" +
         (series.empty() ? std::string() : legend(series)) + svg + "</svg>" +
         (caption.empty() ? std::string() : "<figcaption>" + escape(caption) + "</figcaption>") + "</figure>";
}

std::string ttft_cdf_chart(const std::vector<json>& runs) {
  std::vector<Series> series;
  double low = 1e18;
  double high = 0;
  for (const auto& run : runs) {
    Series one{run.value("name", ""), {}};
    for (const auto& point : member(run, "ttft_cdf")) {
      const double ms = point[0].get<double>();
      one.points.emplace_back(ms, point[1].get<double>());
      if (ms > 0) {
        low = std::min(low, ms);
      }
      high = std::max(high, ms);
    }
    series.push_back(std::move(one));
  }
  if (high <= 0) {
    low = 1;
    high = 10;
  }
  Plot plot(
      {"time to first token (ms, log scale)", std::pow(10, std::floor(std::log10(low))), high * 1.05, true, 1, ""},
      {"share of requests", 0, 1, false, 100, "%"});
  return figure("ttft-cdf", "Time to first token (CDF)", plot.lines(series),
                "Further left is faster; the right end of each curve is the slowest request.", series);
}

std::string hit_rate_chart(const std::vector<json>& runs) {
  std::vector<Series> series;
  double turns = 1;
  bool few = true;
  for (const auto& run : runs) {
    Series one{run.value("name", ""), {}};
    const auto& by_turn = member(run, "hit_rate_by_turn");
    // Turns that a tenth of the conversations reach: beyond them a point
    // is one or two requests, noise rather than a trend.
    const double enough = by_turn.empty() ? 0.0 : by_turn[0].value("requests", 0.0) / 10;
    for (const auto& turn : by_turn) {
      if (turn.value("requests", 0.0) < enough) {
        break;
      }
      one.points.emplace_back(turn.value("turn", 1), turn.value("hit_rate", 0.0));
      turns = std::max(turns, static_cast<double>(turn.value("turn", 1)));
    }
    few = few && one.points.size() <= 30;
    series.push_back(std::move(one));
  }
  Plot plot({"turn", 1, std::max(2.0, turns), false, 1, ""}, {"prefix-cache hit rate", 0, 1, false, 100, "%"});
  return figure("hit-by-turn", "Prefix-cache hit rate by turn", plot.lines(series, few),
                "Turns that at least a tenth of the conversations reach.", series);
}

std::string prefill_chart(const std::vector<json>& runs) {
  double top = 1;
  for (const auto& run : runs) {
    top = std::max(top, run.value("prefill_tokens_computed", 0.0));
  }
  const double row = 26;
  const double first_row = 34;  // under the axis title
  const double height = first_row + row * static_cast<double>(runs.size()) + 10;
  const double left = 170;
  const double width = kWidth - left - 90;
  std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + number(kWidth) + "' height='" + number(height) +
                    "' font-family='sans-serif'>";
  svg += "<text x='" + number(left) + "' y='20' font-size='12'>prompt tokens computed (prompt - cached), summed</text>";
  for (std::size_t index = 0; index < runs.size(); ++index) {
    const double value = runs[index].value("prefill_tokens_computed", 0.0);
    const double y = first_row + row * static_cast<double>(index);
    svg += "<text x='" + number(left - 8) + "' y='" + number(y + 14) + "' text-anchor='end' font-size='12'>" +
           escape(runs[index].value("name", "")) + "</text><rect x='" + number(left) + "' y='" + number(y) +
           "' width='" + number(width * value / top) + "' height='18' fill='" + kColours[index % kColours.size()] +
           "'/><text x='" + number(left + width * value / top + 6) + "' y='" + number(y + 14) + "' font-size='11'>" +
           tick(value) + "</text>";
  }
  return figure("prefill-computed", "Prefill tokens computed (the GPU work spent)", svg,
                "Shorter is better: every cached token is prefill the fleet did not have to compute.");
}

// One small chart per run: requests sent to each worker over the run.
std::string timeline_charts(const std::vector<json>& runs) {
  // Every worker in every chart, in one order: a worker keeps its colour
  // across runs, and one that got nothing shows as a flat line.
  std::set<std::string> names;
  for (const auto& run : runs) {
    for (const auto& [worker, counts] : member(member(run, "worker_timeline"), "workers").items()) {
      names.insert(worker);
    }
  }
  std::string out;
  for (const auto& run : runs) {
    const auto& timeline = member(run, "worker_timeline");
    const double bin_ms = timeline.is_object() ? timeline.value("bin_ms", 1.0) : 1.0;
    std::vector<Series> series;
    double top = 1;
    std::size_t bins = 1;
    const auto& workers = member(timeline, "workers");
    for (const auto& worker : names) {
      Series one{worker, {}};
      const auto& counts = member(workers, worker.c_str());
      for (std::size_t bin = 0; bin < counts.size(); ++bin) {
        const double value = counts[bin].get<double>();
        one.points.emplace_back((static_cast<double>(bin) + 0.5) * bin_ms / 1000, value);
        top = std::max(top, value);
      }
      bins = std::max(bins, counts.size());
      series.push_back(std::move(one));
    }
    Plot plot({"seconds into the run", 0, static_cast<double>(bins) * bin_ms / 1000, false, 1, "s"},
              {"requests per " + number(bin_ms / 1000, "%.2g") + " s", 0, top * 1.1, false, 1, ""}, kWidth / 2 + 20,
              kHeight * 0.75);
    out += figure("worker-timeline", run.value("name", ""), plot.lines(series), "", series);
  }
  // Small multiples, two to a row.
  return "<h2>Requests per worker over time (the hotspot picture)</h2><div class='grid'>" + out + "</div>";
}

std::string page(const std::string& title, const std::string& body) {
  return "<!doctype html><html><head><meta charset='utf-8'><title>" + escape(title) +
         "</title><style>body{font-family:sans-serif;max-width:64em;margin:2em auto;color:#222}"
         "figure{margin:1.5em 0}.grid{display:flex;flex-wrap:wrap}.legend{font-size:12px;margin:0.3em 0}.legend "
         "span{margin-right:1em;white-space:nowrap}.legend "
         "i{display:inline-block;width:11px;height:11px;margin-right:4px}.grid figure{margin:0.5em 0}.grid "
         "h2{font-size:0.95em}figcaption{color:#555;font-size:0.9em}h2{font-size:1.1em}"
         "pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:0.8em}</style></head><body><h1>" +
         escape(title) + "</h1>" + body + "</body></html>\n";
}

}  // namespace

std::string html_report(const std::vector<json>& runs, const json& meta) {
  const std::string table = markdown_report(runs, meta);
  // The charts draw what was measured: a run that failed is named in the table, not drawn as zeros.
  std::vector<json> measured;
  std::copy_if(runs.begin(), runs.end(), std::back_inserter(measured),
               [](const json& run) { return !run.contains("failure"); });
  // A trace's requests are all "turn 1": no chart by turn.
  const bool turns = std::any_of(measured.begin(), measured.end(),
                                 [](const json& run) { return member(run, "hit_rate_by_turn").size() > 1; });
  return page("kvgate-bench report", ttft_cdf_chart(measured) + (turns ? hit_rate_chart(measured) : std::string()) +
                                         prefill_chart(measured) + timeline_charts(measured) + "<h2>Figures</h2><pre>" +
                                         escape(table) + "</pre>");
}

std::string capacity_html(const json& capacity) {
  std::vector<Series> series;
  double top = 1;
  double right = 0.1;
  for (const auto& target : member(capacity, "targets")) {
    Series one{target.value("name", ""), {}};
    for (const auto& step : member(target, "steps")) {
      one.points.emplace_back(step.value("load", 0.0), step.value("ttft_p90_ms", 0.0));
      top = std::max(top, step.value("ttft_p90_ms", 0.0));
      right = std::max(right, step.value("load", 0.0));
    }
    std::sort(one.points.begin(), one.points.end());
    series.push_back(std::move(one));
  }
  const double slo = capacity.value("slo_p90_ttft_ms", 0.0);
  top = std::max(top, slo) * 1.1;
  Plot plot({"offered load (round robin's prefill utilisation)", 0, right * 1.05, false, 100, "%"},
            {"p90 time to first token (ms)", 0, top, false, 1, ""});
  auto svg = plot.lines(series, true);
  svg += "<line x1='" + number(plot.px(0)) + "' x2='" + number(plot.px(right * 1.05)) + "' y1='" +
         number(plot.py(slo)) + "' y2='" + number(plot.py(slo)) + "' stroke='#000' stroke-dasharray='6 4'/><text x='" +
         number(plot.px(0) + 4) + "' y='" + number(plot.py(slo) - 4) + "' font-size='11'>SLO " + tick(slo) +
         " ms</text>";
  return page("kvgate-bench capacity",
              figure("capacity", "p90 TTFT against offered load", svg,
                     "Each point is one run from reset caches; a target's capacity is its highest load under the "
                     "dashed line.",
                     series) +
                  "<h2>Figures</h2><pre>" + escape(capacity_markdown(capacity)) + "</pre>");
}

std::string trajectory_html(const json& trajectory) {
  std::string body;
  for (const auto& target : member(trajectory, "targets")) {
    const auto name = target.value("name", "");
    // Chart names are [a-z-] (scripts/screenshot.py finds them by that).
    std::string chart = name;
    for (char& c : chart) {
      c = (c >= 'a' && c <= 'z') ? c : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : '-';
    }
    std::vector<Series> ttft;
    std::vector<Series> hits;
    double top = 1;
    double turns = 1;
    for (const auto& mode : member(target, "modes")) {
      Series ttft_line{mode.value("mode", ""), {}};
      Series hit_line{mode.value("mode", ""), {}};
      for (const auto& turn : member(mode, "turns")) {
        const double turn_number = turn.value("turn", 0);
        turns = std::max(turns, turn_number);
        if (member(turn, "ttft_ms").is_number()) {
          ttft_line.points.emplace_back(turn_number, turn["ttft_ms"].get<double>());
          top = std::max(top, turn["ttft_ms"].get<double>());
        }
        if (member(turn, "hit_rate").is_number()) {
          hit_line.points.emplace_back(turn_number, turn["hit_rate"].get<double>());
        }
      }
      ttft.push_back(std::move(ttft_line));
      hits.push_back(std::move(hit_line));
    }
    Plot ttft_plot({"turn", 1, turns, false, 1, ""}, {"time to first token (ms)", 0, top * 1.1, false, 1, ""});
    Plot hit_plot({"turn", 1, turns, false, 1, ""}, {"prompt tokens the engine had cached", 0, 1, false, 100, "%"});
    std::string caption = "One line per mode, from reset caches.";
    const auto& cost = member(target, "cold_second_turn_cost");
    if (cost.is_object()) {
      caption += " The cold second turn took " + number(cost.value("cold_ttft_ms", 0.0)) + " ms against " +
                 number(cost.value("sticky_ttft_ms", 0.0)) + " ms when it followed the first.";
    }
    body += figure("trajectory-" + chart, name + ": time to first token by turn", ttft_plot.lines(ttft, true), caption,
                   ttft);
    body += figure("trajectory-hits-" + chart, name + ": cached share of each turn's prompt",
                   hit_plot.lines(hits, true), "", hits);
  }
  return page("kvgate-bench trajectory",
              body + "<h2>Figures</h2><pre>" + escape(trajectory_markdown(trajectory)) + "</pre>");
}

}  // namespace kvgate::load
