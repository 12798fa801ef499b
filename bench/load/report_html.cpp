// The HTML report: the Markdown tables' numbers as two inline SVG charts
// (hit rate by turn, one line per run; TTFT p50 and p99 per run), no
// scripts and no external files, so it opens anywhere.
#include <array>
#include <cstdio>

#include "report.hpp"

namespace kvgate::load {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 6> kColours = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"};
constexpr double kWidth = 640;
constexpr double kHeight = 300;
constexpr double kMargin = 50;

std::string number(double value) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.1f", value);
  return buffer.data();
}

std::string escape(const std::string& text) {
  std::string out;
  for (char character : text) {
    switch (character) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += character;
    }
  }
  return out;
}

std::string axes(const std::string& y_label, double y_max, const std::string& y_unit) {
  std::string svg;
  const double plot_height = kHeight - 2 * kMargin;
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = kHeight - kMargin - plot_height * tick / 4.0;
    svg += "<line x1='" + number(kMargin) + "' x2='" + number(kWidth - 10) + "' y1='" + number(y) + "' y2='" +
           number(y) + "' stroke='#ddd'/>";
    svg += "<text x='" + number(kMargin - 6) + "' y='" + number(y + 4) + "' text-anchor='end' font-size='11'>" +
           number(y_max * tick / 4.0) + y_unit + "</text>";
  }
  svg += "<text x='12' y='" + number(kHeight / 2) + "' font-size='12' transform='rotate(-90 12 " + number(kHeight / 2) +
         ")' text-anchor='middle'>" + escape(y_label) + "</text>";
  return svg;
}

std::string legend(const std::vector<json>& runs) {
  std::string svg;
  for (std::size_t index = 0; index < runs.size(); ++index) {
    const double x = kMargin + 130.0 * static_cast<double>(index);
    svg += "<rect x='" + number(x) + "' y='8' width='12' height='12' fill='" + kColours[index % kColours.size()] +
           "'/><text x='" + number(x + 16) + "' y='18' font-size='12'>" + escape(runs[index].value("name", "")) +
           "</text>";
  }
  return svg;
}

std::string hit_rate_chart(const std::vector<json>& runs) {
  std::size_t turns = 1;
  for (const auto& run : runs) {
    turns = std::max(turns, run["hit_rate_by_turn"].size());
  }
  const double plot_width = kWidth - kMargin - 20;
  const double plot_height = kHeight - 2 * kMargin;
  auto x_of = [&](std::size_t turn) {
    return kMargin +
           (turns == 1 ? plot_width / 2 : plot_width * static_cast<double>(turn) / static_cast<double>(turns - 1));
  };
  std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + number(kWidth) + "' height='" +
                    number(kHeight) + "'>" + axes("prefix-cache hit rate", 100, "%") + legend(runs);
  for (std::size_t turn = 0; turn < turns; ++turn) {
    svg += "<text x='" + number(x_of(turn)) + "' y='" + number(kHeight - kMargin + 16) +
           "' text-anchor='middle' font-size='11'>" + std::to_string(turn + 1) + "</text>";
  }
  svg += "<text x='" + number(kWidth / 2) + "' y='" + number(kHeight - 10) +
         "' text-anchor='middle' font-size='12'>turn</text>";
  for (std::size_t index = 0; index < runs.size(); ++index) {
    std::string points;
    const auto& by_turn = runs[index]["hit_rate_by_turn"];
    for (std::size_t turn = 0; turn < by_turn.size(); ++turn) {
      const double y = kHeight - kMargin - plot_height * by_turn[turn].value("hit_rate", 0.0);
      points += number(x_of(turn)) + "," + number(y) + " ";
    }
    svg += "<polyline fill='none' stroke-width='2' stroke='" + std::string(kColours[index % kColours.size()]) +
           "' points='" + points + "'/>";
  }
  return svg + "</svg>";
}

std::string ttft_chart(const std::vector<json>& runs) {
  double top = 1;
  for (const auto& run : runs) {
    top = std::max(top, run["ttft_ms"].value("p99", 0.0));
  }
  const double plot_width = kWidth - kMargin - 20;
  const double plot_height = kHeight - 2 * kMargin;
  const double group = plot_width / static_cast<double>(std::max<std::size_t>(runs.size(), 1));
  std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + number(kWidth) + "' height='" +
                    number(kHeight) + "'>" + axes("time to first token (ms)", top, "") + legend(runs);
  for (std::size_t index = 0; index < runs.size(); ++index) {
    const auto& ttft = runs[index]["ttft_ms"];
    const std::array<std::pair<const char*, double>, 2> bars = {
        {{"p50", ttft.value("p50", 0.0)}, {"p99", ttft.value("p99", 0.0)}}};
    for (std::size_t bar = 0; bar < bars.size(); ++bar) {
      const double height = plot_height * bars[bar].second / top;
      const double x = kMargin + group * static_cast<double>(index) + group * (0.15 + 0.35 * static_cast<double>(bar));
      svg += "<rect x='" + number(x) + "' y='" + number(kHeight - kMargin - height) + "' width='" +
             number(group * 0.3) + "' height='" + number(height) + "' fill='" + kColours[index % kColours.size()] +
             "' fill-opacity='" + (bar == 0 ? "1" : "0.5") + "'/>";
      svg += "<text x='" + number(x + group * 0.15) + "' y='" + number(kHeight - kMargin + 16) +
             "' text-anchor='middle' font-size='11'>" + bars[bar].first + "</text>";
    }
  }
  return svg + "</svg>";
}

}  // namespace

std::string html_report(const std::vector<json>& runs) {
  std::string table = markdown_report(runs);
  return "<!doctype html><html><head><meta charset='utf-8'><title>kvgate-bench report</title>"
         "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{background:#f6f6f6;padding:1em;"
         "overflow:auto}</style></head><body><h1>kvgate-bench report</h1><h2>Prefix-cache hit rate by turn</h2>" +
         hit_rate_chart(runs) + "<h2>Time to first token</h2>" + ttft_chart(runs) + "<h2>Figures</h2><pre>" +
         escape(table) + "</pre></body></html>\n";
}

}  // namespace kvgate::load
