// The components' own series: each declares its known label values at 0,
// and the request path counts a routed request on its worker's series and
// an unrouted one under worker "none".
#include "kvgate/proxy/request_stats.hpp"

#include <gtest/gtest.h>

#include <string>

#include "kvgate/discovery/discoverer.hpp"
#include "kvgate/obs/exposition.hpp"
#include "kvgate/proxy/admission_gate.hpp"
#include "kvgate/route/session_stats.hpp"

namespace kvgate::proxy {
namespace {

// The value of one series line of the exposition ("name{labels} value"),
// or -1 when absent.
double series_value(const std::string& exposition, const std::string& series) {
  const auto line = "\n" + series + " ";
  const auto at = exposition.find(line);
  if (at == std::string::npos) {
    return -1;
  }
  return std::stod(exposition.substr(at + line.size()));
}

TEST(RequestStats, RoutedRequestsCountOnTheirWorkerAndUnroutedOnesUnderNone) {
  obs::Exposition exposition;
  RequestStats shared(exposition.registry());
  ThreadStats one(shared);
  ThreadStats other(shared);
  obs::WorkerSeries worker("m", "w");
  one.request_finished("m", &worker, 200, 0.1, 0.01, 0.02);
  other.request_finished("m", &worker, 200, 0.1, 0.01, -1);
  one.request_finished("m", nullptr, 503, 0.001, -1, -1);
  other.request_finished("", nullptr, 404, 0.001, -1, -1);
  const obs::WorkerSeries* workers[] = {&worker};
  const auto text = exposition.serialize(workers);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="m",status="200",worker="w"})"), 2);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="m",status="503",worker="none"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="none",status="404",worker="none"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_request_duration_seconds_count{model="m"})"), 3);
  EXPECT_EQ(series_value(text, R"(kvgate_time_to_first_byte_seconds_count{model="m"})"), 2);
  EXPECT_EQ(series_value(text, R"(kvgate_time_to_first_token_seconds_count{model="m",worker="w"})"), 1);
}

TEST(RequestStats, PromptCacheCountsAddUpPerModel) {
  obs::Exposition exposition;
  RequestStats shared(exposition.registry());
  ThreadStats thread(shared);
  thread.prompt_caches("m", {3, 1, 4, 0});
  thread.prompt_caches("m", {2, 0, 0, 5});
  const auto text = exposition.serialize();
  EXPECT_EQ(series_value(text, R"(kvgate_tokenizer_segments_total{model="m",result="hit"})"), 5);
  EXPECT_EQ(series_value(text, R"(kvgate_tokenizer_segments_total{model="m",result="miss"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_template_iterations_total{model="m",result="replayed"})"), 4);
  EXPECT_EQ(series_value(text, R"(kvgate_template_iterations_total{model="m",result="evaluated"})"), 5);
}

// Every component's stats on one registry, as the gateway builds them.
struct ComponentStats : ::testing::Test {
  obs::Exposition exposition;
  RequestStats requests{exposition.registry()};
  AdmissionStats admission{exposition.registry()};
  route::SessionStats sessions{exposition.registry()};
  discovery::DiscoveryStats discovery{exposition.registry()};
};

// Label values the configuration makes known exist at 0 before anything
// happened, each declared by its component.
TEST_F(ComponentStats, KnownLabelValuesStartAtZero) {
  requests.declare_model("m", false);
  requests.declare_model("pd", true);
  requests.declare_client_error(404, "model_not_found");
  admission.declare_tenant("t");
  sessions.declare_model("m");
  discovery.declare("m", discovery::SourceKind::dns);
  const auto text = exposition.serialize();
  for (const char* series : {
           R"(kvgate_session_moves_total{model="m",reason="moved_evicted"})",
           R"(kvgate_session_moves_total{model="m",reason="moved_better_prefix"})",
           R"(kvgate_session_move_prefill_tokens_total{model="m",reason="moved_evicted"})",
           R"(kvgate_session_turn_hit_ratio_count{model="m"})",
           R"(kvgate_retries_total{model="m"})",
           R"(kvgate_retries_denied_total{model="m"})",
           R"(kvgate_chat_template_errors_total{model="m"})",
           R"(kvgate_request_duration_seconds_count{model="m"})",
           R"(kvgate_prefill_placements_total{model="pd",placement="local_prefill"})",
           R"(kvgate_prefill_placements_total{model="pd",placement="remote_prefill"})",
           R"(kvgate_prefill_placements_total{model="pd",placement="prefill_unavailable"})",
           R"(kvgate_prefill_failures_total{model="pd"})",
           R"(kvgate_admission_rejections_total{reason="queue_full",tenant="t"})",
           R"(kvgate_admission_rejections_total{reason="abandoned",tenant="t"})",
           R"(kvgate_client_errors_total{code="model_not_found",status="404"})",
           R"(kvgate_discovery_errors_total{model="m",source="dns"})",
           "kvgate_connections_rejected_total",
           "kvgate_client_connections",
           "kvgate_in_flight_requests",
           "kvgate_admission_queue_length",
           "kvgate_sessions_active",
       }) {
    EXPECT_EQ(series_value(text, series), 0) << series;
  }
  // A model that is not disaggregated has no prefill placements to count.
  EXPECT_EQ(text.find(R"(kvgate_prefill_failures_total{model="m"})"), std::string::npos);
}

TEST_F(ComponentStats, EventsCountUnderTheirLabels) {
  requests.retry("m");
  requests.client_error(400, "invalid_request_error");
  admission.refused("t", admission::RefusalReason::queue_timeout);
  admission.set_state(3, 7);
  sessions.moved("m", policy::Reason::moved_queue, 1'200);
  sessions.turn_hit("m", 0.5);
  discovery.found("m", discovery::SourceKind::file, 4);
  discovery.failed("m", discovery::SourceKind::file);
  const auto text = exposition.serialize();
  EXPECT_EQ(series_value(text, R"(kvgate_retries_total{model="m"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_client_errors_total{code="invalid_request_error",status="400"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_admission_rejections_total{reason="queue_timeout",tenant="t"})"), 1);
  EXPECT_EQ(series_value(text, "kvgate_admission_queue_length"), 3);
  EXPECT_EQ(series_value(text, "kvgate_admission_admitted"), 7);
  EXPECT_EQ(series_value(text, R"(kvgate_session_moves_total{model="m",reason="moved_queue"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_session_move_prefill_tokens_total{model="m",reason="moved_queue"})"), 1'200);
  EXPECT_EQ(series_value(text, R"(kvgate_session_turn_hit_ratio_count{model="m"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_discovered_workers{model="m",source="file"})"), 4);
  EXPECT_EQ(series_value(text, R"(kvgate_discovery_errors_total{model="m",source="file"})"), 1);
}

}  // namespace
}  // namespace kvgate::proxy
