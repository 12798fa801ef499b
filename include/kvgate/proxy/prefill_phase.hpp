#pragma once
// The prefill phase of a disaggregated request: the prefill worker's answer
// is read whole and never relayed to the client. Under vLLM's protocol it
// comes first, and its kv_transfer_params go to the decoder; under SGLang's
// it runs beside the decoder's phase. The decoder's phase is an ordinary
// relay (relay.hpp).
// While it runs, the CancelLink points at the prefill worker's connection:
// a client that leaves closes it.
#include <optional>

#include "kvgate/openai/disaggregation.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/proxy/client_session.hpp"
#include "kvgate/proxy/relay.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::proxy {

struct PrefillOutcome {
  enum class Kind {
    answered,     // 200 with a JSON body: `answer` holds what it said
    retryable,    // no answer, a 5xx, or one kvgate cannot read: another prefill worker, or the decoder
    refused,      // a 4xx: the request itself is wrong, the client gets `error`
    client_left,  // the client went away; both phases end
  };
  Kind kind = Kind::answered;
  openai::PrefillAnswer answer;
  std::optional<openai::ApiError> error;
  workers::FailureCause failure = workers::FailureCause::none;
  bool reached_worker = true;
};

// `json_answer`: the answer must be a JSON object (vLLM's, which carries
// kv_transfer_params); SGLang's prefill worker may answer a stream, whose
// success is its status.
http::awaitable<PrefillOutcome> run_prefill(ClientSession& session, const Exchange& exchange,
                                            const workers::WorkerState& worker, Relay::UpstreamRequest& request,
                                            CancelLink& link, bool json_answer);

}  // namespace kvgate::proxy
