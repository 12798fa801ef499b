#pragma once
// The engines' disaggregated-serving wire formats, as request and answer
// bodies (docs/disaggregation.md has them in full):
//
// vLLM (KV connectors such as NIXL; its disaggregated proxy examples): the
// prefill worker gets the request with
//   "kv_transfer_params": {"do_remote_decode": true, "do_remote_prefill":
//   false, "remote_engine_id": null, "remote_block_ids": null,
//   "remote_host": null, "remote_port": null}
// "stream": false, "max_tokens": 1 (and "max_completion_tokens": 1 when the
// client used it), without "stream_options", "min_tokens" and
// "min_completion_tokens"; its answer carries "kv_transfer_params" (where
// the decoder reads the KV: do_remote_prefill, remote_block_ids,
// remote_engine_id, remote_host, remote_port, tp_size), which the decode
// request carries unchanged in the client's request.
//
// SGLang (PD mode): the same request to both workers at once, with
// "bootstrap_host", "bootstrap_port" (the prefill worker's bootstrap server)
// and "bootstrap_room" (a number naming this transfer) added.
//
// Pure: bodies in, bodies out. Preconditions: the client's body is a JSON
// object (inspect_request accepted it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvgate::openai {

std::string vllm_prefill_body(std::string_view body);

// What kvgate reads of a prefill worker's answer.
struct PrefillAnswer {
  std::string kv_transfer_params;  // the object as JSON text; empty: the answer had none
  std::optional<std::uint32_t> prompt_tokens;
  std::optional<std::uint32_t> cached_tokens;
};
// nullopt: not a JSON object.
std::optional<PrefillAnswer> read_prefill_answer(std::string_view body);

// The client's body with the prefill answer's kv_transfer_params (JSON text
// of an object) set.
std::string vllm_decode_body(std::string_view body, std::string_view kv_transfer_params);

std::string sglang_pd_body(std::string_view body, std::string_view bootstrap_host, std::uint16_t bootstrap_port,
                           std::uint64_t bootstrap_room);

}  // namespace kvgate::openai
