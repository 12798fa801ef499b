#include "kvgate/admin/status_page.hpp"

#include <gtest/gtest.h>

namespace kvgate::admin {
namespace {

TEST(HtmlEscape, EscapesMarkupAndReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(kvgate::html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(kvgate::html_escape("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(kvgate::html_escape("bad \xFF<"), "bad \xEF\xBF\xBD&lt;");
}

StatusView view_with_one_of_each() {
  StatusView view;
  view.version = "0.1.0";
  view.policy = "cache_aware";
  view.now_unix_ms = 1'700'000'100'000;
  view.bucket_ms = 10'000;
  view.hit_buckets.resize(6);
  for (std::size_t at = 0; at < view.hit_buckets.size(); ++at) {
    view.hit_buckets[at].start_unix_ms = view.now_unix_ms - (5 - at) * 10'000;
  }
  view.hit_buckets[4] = {view.hit_buckets[4].start_unix_ms, 2, 1'000, 750};
  view.hit_buckets[5] = {view.hit_buckets[5].start_unix_ms, 1, 1'000, 250};
  WorkerRow up;
  up.id = "w-up";
  up.model = "m";
  up.healthy = true;
  up.mode = "events";
  up.events = "connected";
  up.kv_usage = 0.42;
  up.ttft_ratio_p50 = 1.25;
  up.ttft_ratio_p90 = 3.5;
  WorkerRow ejected = up;
  ejected.id = "w-\"ejected\"";
  ejected.ejected = true;
  ejected.ttft_ratio_p50.reset();
  view.workers = {up, ejected};
  obs::RoutedRequest request;
  request.unix_ms = view.now_unix_ms - 3'000;
  request.request_id.assign("req-1");
  request.worker.assign("w-up");
  request.reason.assign("prefix_hit");
  request.session.assign("<img src=x>");
  request.status = 502;
  view.recent = {request};
  return view;
}

TEST(StatusPage, SaysWhatIsUpAndEscapesEveryTextItShows) {
  const auto html = render_status_page(view_with_one_of_each());
  EXPECT_NE(html.find("<b>1 / 2</b>workers routable"), std::string::npos);
  EXPECT_NE(html.find("<b>50.0%</b>prompt tokens cached, last 1 min"), std::string::npos);  // 1000 of 2000
  EXPECT_NE(html.find("w-&quot;ejected&quot;"), std::string::npos);
  EXPECT_NE(html.find(">ejected<"), std::string::npos);
  EXPECT_NE(html.find("42%"), std::string::npos);
  EXPECT_NE(html.find("<th>TTFT / expected</th>"), std::string::npos);
  EXPECT_NE(html.find("1.25× (p90 3.50×)"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("3 s ago"), std::string::npos);
  EXPECT_NE(html.find("class=\"bad\">502<"), std::string::npos);
  EXPECT_NE(html.find("No session within its idle time"), std::string::npos);
  // Two buckets with traffic, two bars; the four empty ones draw nothing.
  std::size_t bars = 0;
  for (auto at = html.find("class=\"bar\""); at != std::string::npos; at = html.find("class=\"bar\"", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 2u);
}

// A disaggregated fleet: each worker's role, and each request's prefill
// worker beside its decoder; an aggregated fleet shows no role column.
TEST(StatusPage, ADisaggregatedFleetShowsRolesAndBothWorkersOfARequest) {
  auto view = view_with_one_of_each();
  EXPECT_EQ(render_status_page(view).find("<th>role</th>"), std::string::npos);
  view.workers[0].role = "prefill";
  view.workers[1].role = "decode";
  view.recent[0].worker.assign("d<1>");
  view.recent[0].prefill_worker.assign("p1");
  const auto html = render_status_page(view);
  EXPECT_NE(html.find("<th>role</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>prefill</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>decode</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>d&lt;1&gt; (prefill: p1)</td>"), std::string::npos);
}

TEST(StatusPage, AFleetWithNoTrafficShowsDashesNotNumbers) {
  StatusView view;
  view.policy = "round_robin";
  view.bucket_ms = 20'000;
  view.hit_buckets.resize(30);
  const auto html = render_status_page(view);
  EXPECT_NE(html.find("<b>0 / 0</b>"), std::string::npos);
  EXPECT_NE(html.find("<b>–</b>prompt tokens cached, last 10 min"), std::string::npos);
  EXPECT_NE(html.find("No routed request yet"), std::string::npos);
}

// A replica of a cluster shows its engine, its peers (escaped) and, per
// worker, the peers' requests in flight beside its own; one alone shows
// no Cluster section.
TEST(StatusPage, AClusterReplicaShowsItsPeersAndTheirLoad) {
  auto view = view_with_one_of_each();
  EXPECT_EQ(render_status_page(view).find("<h2>Cluster</h2>"), std::string::npos);
  view.workers.front().in_flight = 2;
  view.workers.front().peer_in_flight = 3;
  cluster::ClusterStatus status;
  status.replica_id = "gw-1";
  status.engine = "redis://10.0.0.5:6379";
  status.stream = "kvgate";
  status.connected = false;
  status.peers.push_back({"gw-<2>", view.now_ms - 500, 1.5, 40, 1, true, 3});
  status.peers.push_back({"gw-3", view.now_ms - 90'000, 0, 12, 0, false, 0});
  view.cluster = status;
  const auto html = render_status_page(view);
  EXPECT_NE(html.find("<h2>Cluster</h2>"), std::string::npos);
  EXPECT_NE(html.find("cut off: routing on this replica's own state"), std::string::npos);
  EXPECT_NE(html.find("<td>gw-&lt;2&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find(">silent</td>"), std::string::npos);
  EXPECT_NE(html.find("2 (+3 peers)"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::admin
