// The checker must fail on what it is meant to catch: each mutation of a
// valid rendering below must be reported with the expected words.
// usage: node selftest.mjs RENDERED.yaml [--kvgate PATH]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, stringify } from "yaml";

const [rendered, ...rest] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const original = parseAllDocuments(readFileSync(rendered, "utf8")).map((d) => d.toJS());
const find = (objects, kind) => objects.find((o) => o.kind === kind);
const container = (objects) => find(objects, "Deployment").spec.template.spec.containers[0];
const config = (objects) => find(objects, "ConfigMap").data;

const mutations = {
  "a port that is not a number fails the schema": [(o) => (container(o).ports[0].containerPort = "eighty"), "schema"],
  "a replica count that is not a number fails the schema": [(o) => (find(o, "Deployment").spec.replicas = "two"), "schema"],
  "a Service selecting other pods": [(o) => (find(o, "Service").spec.selector = { app: "other" }), "does not select"],
  "a PDB selecting other pods": [
    (o) => (find(o, "PodDisruptionBudget").spec.selector.matchLabels = { app: "other" }),
    "does not select",
  ],
  "a Deployment selector that misses its template": [
    (o) => (find(o, "Deployment").spec.selector.matchLabels = { "app.kubernetes.io/name": "x" }),
    "does not select the pod template",
  ],
  "a readiness probe on a port the container lacks": [
    (o) => (container(o).readinessProbe.httpGet.port = "metrics"),
    "is not a port of container",
  ],
  "a liveness probe on the wrong path": [(o) => (container(o).livenessProbe.httpGet.path = "/health"), "/healthz"],
  "a grace shorter than the drain": [
    (o) => (find(o, "Deployment").spec.template.spec.terminationGracePeriodSeconds = 20),
    "terminationGracePeriodSeconds 20",
  ],
  "a config that binds loopback": [
    (o) => {
      const data = config(o);
      data["kvgate.yaml"] = data["kvgate.yaml"].replace("listen: 0.0.0.0:8080", "listen: 127.0.0.1:8080");
    },
    "must bind every interface",
  ],
  "a config whose admin port differs from the container's": [
    (o) => {
      const data = config(o);
      data["kvgate.yaml"] = data["kvgate.yaml"].replace("admin_listen: 0.0.0.0:9090", "admin_listen: 0.0.0.0:9100");
    },
    "container port admin is 9090",
  ],
  "a config kvgate refuses": [
    (o) => {
      const data = config(o);
      data["kvgate.yaml"] = data["kvgate.yaml"].replace("policy: cache_aware", "policy: fastest_please");
    },
    "kvgate check-config",
  ],
  "a Service targetPort the container lacks": [(o) => (find(o, "Service").spec.ports[0].targetPort = "http"), "targetPort http"],
};

const folder = mkdtempSync(join(tmpdir(), "kvgate-k8s-selftest-"));
let failures = 0;
try {
  for (const [name, [mutate, expected]] of Object.entries(mutations)) {
    if (name === "a config kvgate refuses" && !rest.includes("--kvgate")) continue;
    const objects = structuredClone(original);
    mutate(objects);
    const path = join(folder, "mutated.yaml");
    writeFileSync(path, objects.map((o) => stringify(o)).join("---\n"));
    const run = spawnSync(process.execPath, [join(here, "check.mjs"), path, ...rest], { encoding: "utf8" });
    if (run.status !== 1 || !run.stdout.includes(expected)) {
      failures++;
      console.log(`NOT CAUGHT: ${name} (exit ${run.status}, expected "${expected}")\n${run.stdout}${run.stderr}`);
    } else {
      console.log(`caught: ${name}`);
    }
  }
} finally {
  rmSync(folder, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);
