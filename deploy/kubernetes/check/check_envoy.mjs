// Checks deploy/envoy/envoy.yaml, the plain Envoy in front of kvgate's
// endpoint picker, for what the picker needs (Envoy itself validates the
// file, deploy_envoy_validate, and runs it, tests/integration/envoy_test.cpp):
// an ext_proc filter before the router whose
// cluster exists and speaks HTTP/2, both bodies FULL_DUPLEX_STREAMED and
// both header phases sent, and routes to an ORIGINAL_DST cluster keyed on
// x-gateway-destination-endpoint.
// usage: node check_envoy.mjs envoy.yaml
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

const file = process.argv[2];
const problems = [];
const config = parseYaml(readFileSync(file, "utf8"));
const clusters = new Map((config.static_resources?.clusters ?? []).map((c) => [c.name, c]));
const listeners = config.static_resources?.listeners ?? [];
if (!listeners.length) problems.push("no listener");
for (const listener of listeners) {
  for (const chain of listener.filter_chains ?? []) {
    for (const filter of chain.filters ?? []) {
      const manager = filter.typed_config ?? {};
      const filters = manager.http_filters ?? [];
      const names = filters.map((f) => f.name);
      const extProc = filters.find((f) => f.name === "envoy.filters.http.ext_proc")?.typed_config;
      if (!extProc) {
        problems.push(`${listener.name}: no ext_proc filter`);
        continue;
      }
      if (names.indexOf("envoy.filters.http.ext_proc") > names.indexOf("envoy.filters.http.router")) {
        problems.push(`${listener.name}: the ext_proc filter must come before the router`);
      }
      const mode = extProc.processing_mode ?? {};
      for (const [key, want] of [
        ["request_header_mode", "SEND"],
        ["response_header_mode", "SEND"],
        ["request_body_mode", "FULL_DUPLEX_STREAMED"],
        ["response_body_mode", "FULL_DUPLEX_STREAMED"],
      ]) {
        if (mode[key] !== want) problems.push(`${listener.name}: processing_mode.${key} must be ${want}`);
      }
      const picker = clusters.get(extProc.grpc_service?.envoy_grpc?.cluster_name);
      if (!picker) {
        problems.push(`${listener.name}: the ext_proc grpc_service names no cluster of the file`);
      } else if (
        !picker.typed_extension_protocol_options?.["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
          ?.explicit_http_config?.http2_protocol_options
      ) {
        problems.push(`cluster ${picker.name}: gRPC needs HTTP/2 (explicit_http_config.http2_protocol_options)`);
      }
      for (const host of manager.route_config?.virtual_hosts ?? []) {
        for (const route of host.routes ?? []) {
          const cluster = clusters.get(route.route?.cluster);
          if (!cluster) {
            problems.push(`route ${route.match?.prefix}: cluster ${route.route?.cluster} is not in the file`);
            continue;
          }
          const lb = cluster.original_dst_lb_config ?? {};
          if (cluster.type !== "ORIGINAL_DST" || cluster.lb_policy !== "CLUSTER_PROVIDED") {
            problems.push(`cluster ${cluster.name}: must be ORIGINAL_DST with lb_policy CLUSTER_PROVIDED`);
          }
          if (!lb.use_http_header || lb.http_header_name !== "x-gateway-destination-endpoint") {
            problems.push(`cluster ${cluster.name}: must take the destination from x-gateway-destination-endpoint`);
          }
        }
      }
    }
  }
}
for (const line of problems) console.log(`${file}: ${line}`);
if (problems.length) process.exit(1);
console.log(`${file}: the picker's data path is complete`);
