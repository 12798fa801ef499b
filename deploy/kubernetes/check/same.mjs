// Two renderings hold the same objects (the ConfigMap's generated hash
// suffix aside, which differs between kustomize versions).
// usage: node same.mjs A.yaml B.yaml
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const load = (file) =>
  parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS())
    .filter(Boolean)
    .map((o) => JSON.stringify(o, (key, value) => (typeof value === "string" ? value.replace(/^(kvgate-config)-[a-z0-9]{10}$/, "$1") : value)))
    .sort();
const [a, b] = process.argv.slice(2);
const left = load(a);
const right = load(b);
if (left.length !== right.length || left.some((object, at) => object !== right[at])) {
  console.log(`${a} differs from ${b}: run deploy/kubernetes/render.sh`);
  process.exit(1);
}
