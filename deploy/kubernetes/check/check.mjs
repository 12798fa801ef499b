// Checks rendered Kubernetes manifests (a multi-document YAML file) for
// kvgate: every object against the Kubernetes (and Prometheus Operator)
// schemas, then the project's own rules, which a schema cannot see:
//   - label selectors (Deployment, Service, PodDisruptionBudget, PodMonitor)
//     select the gateway's pods;
//   - probe, Service and PodMonitor ports exist in the container spec, and
//     the probes ask the admin listener for /readyz and /healthz;
//   - the mounted configuration is valid (`kvgate check-config`), binds the
//     ports the container declares, and the pod's termination grace covers
//     timeouts.shutdown_grace plus the preStop sleep;
//   - an InferencePool (Gateway API Inference Extension v1, checked against
//     its CRD's rules here: no schema package has it) names a Service of
//     the rendering whose port reaches the container port the config's
//     epp_listen binds.
// usage: node check.mjs RENDERED.yaml [--kvgate PATH/TO/kvgate]
// Prints one line per problem and exits 1 when there is any.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";

const args = process.argv.slice(2);
if (args.length < 1) {
  console.error("usage: node check.mjs RENDERED.yaml [--kvgate PATH]");
  process.exit(64);
}
const file = args[0];
const kvgateAt = args.indexOf("--kvgate");
const kvgate = kvgateAt >= 0 ? args[kvgateAt + 1] : null;

const problems = [];
const problem = (object, text) =>
  problems.push(`${object ? `${object.kind}/${object.metadata?.name}` : file}: ${text}`);

const modules = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

const objects = [];
for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
  if (document.errors.length) {
    problem(null, `YAML: ${document.errors[0].message}`);
    continue;
  }
  const object = document.toJS();
  if (object) objects.push(object);
}
if (!objects.length) problem(null, "no objects");

// The InferencePool v1 CRD's rules (inference.networking.k8s.io, the
// gateway-api-inference-extension project's api/v1).
function inferencePoolProblems(pool) {
  const found = [];
  const spec = pool.spec ?? {};
  const labels = spec.selector?.matchLabels;
  if (!labels || !Object.keys(labels).length) found.push("spec.selector.matchLabels must name the pool's pods");
  const ports = spec.targetPorts ?? [];
  if (ports.length < 1 || ports.length > 8) found.push("spec.targetPorts must hold 1 to 8 ports");
  for (const port of ports) {
    if (!Number.isInteger(port.number) || port.number < 1 || port.number > 65535) {
      found.push(`spec.targetPorts: ${JSON.stringify(port)} is not a port number`);
    }
  }
  const ref = spec.endpointPickerRef;
  if (!ref?.name) found.push("spec.endpointPickerRef.name is required");
  if (ref && (ref.kind ?? "Service") === "Service" && !Number.isInteger(ref.port?.number)) {
    found.push("spec.endpointPickerRef.port.number is required for a Service");
  }
  if (ref?.failureMode !== undefined && !["FailOpen", "FailClose"].includes(ref.failureMode)) {
    found.push(`spec.endpointPickerRef.failureMode ${ref.failureMode} is not FailOpen or FailClose`);
  }
  const known = new Set(["selector", "targetPorts", "endpointPickerRef"]);
  for (const key of Object.keys(spec)) if (!known.has(key)) found.push(`spec.${key} is not a field of InferencePool`);
  return found;
}

// 1. Schemas.
for (const object of objects) {
  if (object.apiVersion === "inference.networking.k8s.io/v1" && object.kind === "InferencePool") {
    for (const text of inferencePoolProblems(object)) problem(object, `schema: ${text}`);
    continue;
  }
  const modulePath = modules[object.apiVersion];
  if (!modulePath) {
    problem(object, `no schema known for apiVersion ${object.apiVersion}`);
    continue;
  }
  const model = (await import(modulePath))[object.kind];
  if (!model) {
    problem(object, `no schema for kind ${object.kind} in ${object.apiVersion}`);
    continue;
  }
  try {
    new model(object).validate();
  } catch (error) {
    const details = (error.errors || []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
    problem(object, `schema: ${details || error.message}`);
  }
}

const byKind = (kind) => objects.filter((object) => object.kind === kind);
const namespaceOf = (object) => object.metadata?.namespace ?? "default";
const selects = (selector, labels) =>
  selector && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([key, value]) => labels?.[key] === value);

// Durations as kvgate reads them (units.cpp): ms, s, m, h.
function seconds(text) {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(String(text).trim());
  if (!match) return null;
  return Number(match[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[match[2]];
}
const portOf = (address) => Number(String(address).split(":").pop());

const workloads = byKind("Deployment");
if (!workloads.length) problem(null, "no Deployment");
for (const deployment of workloads) {
  const pod = deployment.spec?.template;
  const podLabels = pod?.metadata?.labels ?? {};
  // 2. Selectors.
  if (!selects(deployment.spec?.selector?.matchLabels, podLabels)) {
    problem(deployment, "spec.selector.matchLabels does not select the pod template's labels");
  }
  const container = (pod?.spec?.containers ?? []).find((c) => c.name === "kvgate") ?? pod?.spec?.containers?.[0];
  if (!container) {
    problem(deployment, "no container");
    continue;
  }
  const ports = container.ports ?? [];
  const portExists = (port) =>
    typeof port === "number" ? ports.some((p) => p.containerPort === port) : ports.some((p) => p.name === port);
  const portNumber = (port) => (typeof port === "number" ? port : ports.find((p) => p.name === port)?.containerPort);

  // 3. Probes.
  const probes = { readinessProbe: "/readyz", livenessProbe: "/healthz" };
  for (const [probeName, path] of Object.entries(probes)) {
    const probe = container[probeName];
    if (!probe?.httpGet) {
      problem(deployment, `${probeName} must be an httpGet probe of ${path}`);
      continue;
    }
    if (!portExists(probe.httpGet.port)) {
      problem(deployment, `${probeName} port ${probe.httpGet.port} is not a port of container ${container.name}`);
    }
    if (probe.httpGet.path !== path) {
      problem(deployment, `${probeName} asks ${probe.httpGet.path}, kvgate answers it on ${path}`);
    }
  }
  if (container.startupProbe?.httpGet && !portExists(container.startupProbe.httpGet.port)) {
    problem(deployment, `startupProbe port ${container.startupProbe.httpGet.port} is not a container port`);
  }

  // 4. The configuration the pod mounts.
  const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === "/etc/kvgate");
  const volume = mount && (pod.spec.volumes ?? []).find((v) => v.name === mount.name);
  const configMap =
    volume?.configMap &&
    byKind("ConfigMap").find(
      (c) => c.metadata.name === volume.configMap.name && namespaceOf(c) === namespaceOf(deployment),
    );
  const configArgument = (container.args ?? [])[(container.args ?? []).indexOf("--config") + 1];
  if (!configMap) {
    problem(deployment, "no ConfigMap mounted at /etc/kvgate (the manifests must carry kvgate's configuration)");
    continue;
  }
  const configKey = configArgument?.startsWith("/etc/kvgate/") ? configArgument.slice("/etc/kvgate/".length) : null;
  const configText = configKey && configMap.data?.[configKey];
  if (!configText) {
    problem(deployment, `--config ${configArgument} is not a key of ConfigMap ${configMap.metadata.name}`);
    continue;
  }
  const config = parseYaml(configText) ?? {};
  for (const [listener, portName] of [["listen", "api"], ["admin_listen", "admin"]]) {
    const address = config[listener];
    if (!address) {
      problem(configMap, `${listener} is not set: the default binds 127.0.0.1, unreachable from outside the pod`);
      continue;
    }
    if (!/^(0\.0\.0\.0|\[::\]):\d+$/.test(address)) {
      problem(configMap, `${listener} ${address} must bind every interface (0.0.0.0:PORT) inside a pod`);
    }
    if (portNumber(portName) !== portOf(address)) {
      problem(deployment, `container port ${portName} is ${portNumber(portName)}, the config's ${listener} is ${address}`);
    }
  }
  if (config.epp_listen) {
    if (!/^(0\.0\.0\.0|\[::\]):\d+$/.test(config.epp_listen)) {
      problem(configMap, `epp_listen ${config.epp_listen} must bind every interface (0.0.0.0:PORT) inside a pod`);
    }
    if (portNumber("epp") !== portOf(config.epp_listen)) {
      problem(deployment, `container port epp is ${portNumber("epp")}, the config's epp_listen is ${config.epp_listen}`);
    }
  }
  // An InferencePool's picker is a Service port that reaches epp_listen.
  for (const pool of byKind("InferencePool")) {
    if (namespaceOf(pool) !== namespaceOf(deployment)) continue;
    const ref = pool.spec?.endpointPickerRef ?? {};
    const service = byKind("Service").find((s) => s.metadata.name === ref.name && namespaceOf(s) === namespaceOf(pool));
    if (!service) {
      problem(pool, `endpointPickerRef names Service ${ref.name}, which is not in the manifests`);
      continue;
    }
    const servicePort = (service.spec?.ports ?? []).find((p) => p.port === ref.port?.number);
    if (!servicePort) {
      problem(pool, `Service ${ref.name} has no port ${ref.port?.number}`);
    } else if (!config.epp_listen) {
      problem(configMap, "an InferencePool names kvgate as its endpoint picker, and epp_listen is not set");
    } else if (portNumber(servicePort.targetPort ?? servicePort.port) !== portOf(config.epp_listen)) {
      problem(pool, `Service ${ref.name} port ${ref.port.number} does not reach epp_listen ${config.epp_listen}`);
    }
  }
  for (const [probeName] of Object.entries(probes)) {
    const port = portNumber(container[probeName]?.httpGet?.port);
    if (config.admin_listen && port !== undefined && port !== portOf(config.admin_listen)) {
      problem(deployment, `${probeName} goes to port ${port}, the admin listener is ${config.admin_listen}`);
    }
  }
  const grace = seconds(config.timeouts?.shutdown_grace ?? "30s");
  const preStop = container.lifecycle?.preStop;
  const sleepCommand = preStop?.exec?.command ?? [];
  const preStopSeconds = preStop?.sleep?.seconds ?? (/sleep$/.test(sleepCommand[0] ?? "") ? Number(sleepCommand[1]) : 0);
  const termination = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (grace === null) {
    problem(configMap, `timeouts.shutdown_grace ${config.timeouts.shutdown_grace} is not a duration`);
  } else if (termination < grace + preStopSeconds) {
    problem(
      deployment,
      `terminationGracePeriodSeconds ${termination} < shutdown_grace ${grace} s + preStop ${preStopSeconds} s: ` +
        "the kubelet would kill streams the drain lets finish",
    );
  }
  if (kvgate) {
    const folder = mkdtempSync(join(tmpdir(), "kvgate-k8s-"));
    try {
      const path = join(folder, configKey);
      writeFileSync(path, configText);
      execFileSync(kvgate, ["check-config", path], { stdio: ["ignore", "pipe", "pipe"] });
    } catch (error) {
      problem(configMap, `kvgate check-config: ${String(error.stderr ?? error.message).trim()}`);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }
  if (pod.spec.securityContext?.runAsNonRoot !== true && container.securityContext?.runAsNonRoot !== true) {
    problem(deployment, "the pod must run as non-root (securityContext.runAsNonRoot)");
  }

  // 2 and 3 for the objects that point at the pods.
  for (const kind of ["Service", "PodDisruptionBudget", "PodMonitor"]) {
    for (const object of byKind(kind)) {
      if (namespaceOf(object) !== namespaceOf(deployment) && kind !== "PodMonitor") continue;
      const selector = kind === "Service" ? object.spec?.selector : object.spec?.selector?.matchLabels;
      if (!selects(selector, podLabels)) {
        problem(object, `its selector ${JSON.stringify(selector)} does not select the kvgate pods`);
        continue;
      }
      if (kind === "Service") {
        for (const port of object.spec.ports ?? []) {
          if (!portExists(port.targetPort ?? port.port)) {
            problem(object, `targetPort ${port.targetPort ?? port.port} is not a port of container ${container.name}`);
          }
        }
      }
      if (kind === "PodMonitor") {
        for (const endpoint of object.spec.podMetricsEndpoints ?? []) {
          if (!portExists(endpoint.port)) problem(object, `port ${endpoint.port} is not a container port`);
          if (portNumber(endpoint.port) !== portOf(config.admin_listen ?? "")) {
            problem(object, `scrapes port ${endpoint.port}, /metrics is on the admin listener ${config.admin_listen}`);
          }
        }
      }
    }
  }
}
for (const kind of ["Service", "PodDisruptionBudget"]) {
  if (!byKind(kind).length) problem(null, `no ${kind}`);
}

for (const line of problems) console.log(line);
if (problems.length) process.exit(1);
console.log(`${file}: ${objects.length} objects valid (${objects.map((o) => o.kind).join(", ")})`);
