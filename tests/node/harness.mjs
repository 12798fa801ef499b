// Starts kvgate-test-upstream replicas and kvgate for the SDK tests, on
// 127.0.0.1 with kernel-chosen ports; everything is stopped by PID.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const buildDir = process.env.KVGATE_BUILD_DIR ?? new URL('../../build', import.meta.url).pathname;

function start(binary, args, readyPrefix) {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => reject(new Error(`${binary} not ready: ${stderr}`)), 10000);
    lines.on('line', (line) => {
      if (line.startsWith(readyPrefix)) {
        clearTimeout(timer);
        resolve({ child, line });
      }
    });
    child.on('exit', (code) => reject(new Error(`${binary} exited with ${code}: ${stderr}`)));
  });
}

const portOf = (text) => Number(text.slice(text.lastIndexOf(':') + 1));

// A disaggregated fleet: one prefill and one decode kvgate-sim replica
// (vLLM's protocol) behind kvgate.
export async function startPdStack() {
  const folder = mkdtempSync(join(tmpdir(), 'kvgate-node-pd-'));
  const sims = [];
  for (const [id, role] of [['p0', 'prefill'], ['d0', 'decode']]) {
    const { child, line } = await start(`${buildDir}/bench/sim/kvgate-sim`,
      ['--model', 'pd-model', '--id', id, '--role', role, '--time-scale', '100'], 'listening');
    sims.push({ id, role, child, port: portOf(line) });
  }
  const config = join(folder, 'kvgate.yaml');
  writeFileSync(config, [
    'listen: "127.0.0.1:0"', 'admin_listen: "127.0.0.1:0"', 'threads: 1', 'routing: {receipt: true}', 'models:',
    '  - name: pd-model', '    disaggregation: {protocol: vllm, local_prefill_tokens: 64}', '    workers:',
    ...sims.map((s) => `      - {id: ${s.id}, url: "http://127.0.0.1:${s.port}", role: ${s.role}}`), ''].join('\n'));
  const gateway = await start(`${buildDir}/src/kvgate`, ['--config', config], 'kvgate listening');
  const api = gateway.line.match(/api=(\S+)/)[1];
  return {
    baseURL: `http://${api}/v1`,
    async stop() {
      for (const child of [gateway.child, ...sims.map((s) => s.child)]) {
        child.kill('SIGTERM');
        await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
      }
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

export async function startStack() {
  const folder = mkdtempSync(join(tmpdir(), 'kvgate-node-'));
  const upstreams = [];
  for (const id of ['u0', 'u1']) {
    const { child, line } = await start(`${buildDir}/bench/upstream/kvgate-test-upstream`,
      ['--id', id, '--model', 'test-model'], 'listening');
    upstreams.push({ id, child, port: portOf(line) });
  }
  const config = join(folder, 'kvgate.yaml');
  writeFileSync(config, [
    'listen: "127.0.0.1:0"', 'admin_listen: "127.0.0.1:0"', 'threads: 1',
    'routing: {policy: round_robin}', 'models:', '  - name: test-model', '    workers:',
    ...upstreams.map((u) => `      - {id: ${u.id}, url: "http://127.0.0.1:${u.port}"}`), ''].join('\n'));
  const gateway = await start(`${buildDir}/src/kvgate`, ['--config', config], 'kvgate listening');
  const api = gateway.line.match(/api=(\S+)/)[1];
  return {
    baseURL: `http://${api}/v1`,
    async stop() {
      for (const child of [gateway.child, ...upstreams.map((u) => u.child)]) {
        child.kill('SIGTERM');
        await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
      }
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

// kvgate as the endpoint picker behind a real Envoy (.tools/bin/envoy,
// installed by scripts/setup.sh test) running deploy/envoy/envoy.yaml with
// its ports changed, in front of two kvgate-sim replicas. The client's
// base URL is Envoy's listener.
export async function startEnvoyStack() {
  const top = new URL('../..', import.meta.url).pathname;
  const envoyBinary = process.env.KVGATE_ENVOY ?? `${top}/.tools/bin/envoy`;
  if (!existsSync(envoyBinary)) {
    throw new Error(`no Envoy at ${envoyBinary}: run scripts/setup.sh test`);
  }
  const folder = mkdtempSync(join(tmpdir(), 'kvgate-node-envoy-'));
  const sims = [];
  for (const id of ['s0', 's1']) {
    const { child, line } = await start(`${buildDir}/bench/sim/kvgate-sim`,
      ['--model', 'sim-model', '--id', id, '--time-scale', '100'], 'listening');
    sims.push({ id, child, port: portOf(line) });
  }
  const config = join(folder, 'kvgate.yaml');
  writeFileSync(config, [
    'listen: "127.0.0.1:0"', 'admin_listen: "127.0.0.1:0"', 'epp_listen: "127.0.0.1:0"', 'threads: 1',
    'routing: {policy: cache_aware, receipt: true}', 'models:', '  - name: sim-model', '    workers:',
    ...sims.map((s) => `      - {id: ${s.id}, url: "http://127.0.0.1:${s.port}"}`), ''].join('\n'));
  const gateway = await start(`${buildDir}/src/kvgate`, ['--config', config], 'kvgate listening');
  const epp = portOf(gateway.line.match(/epp=(\S+)/)[1]);
  const admin = gateway.line.match(/admin=(\S+)/)[1];
  const [port, adminPort] = [await freePort(), await freePort()];
  const shipped = readFileSync(`${top}/deploy/envoy/envoy.yaml`, 'utf8');
  const envoyConfig = join(folder, 'envoy.yaml');
  writeFileSync(envoyConfig, shipped
    .replace('{address: 0.0.0.0, port_value: 8081}', `{address: 127.0.0.1, port_value: ${port}}`)
    .replace('port_value: 9002}', `port_value: ${epp}}`)
    .replace('port_value: 9901}', `port_value: ${adminPort}}`));
  const envoy = spawn(envoyBinary, ['-c', envoyConfig, '--concurrency', '1', '--disable-hot-restart', '-l', 'warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let envoyErrors = '';
  envoy.stderr.on('data', (chunk) => { envoyErrors += chunk; });
  const deadline = Date.now() + 30000;
  for (;;) {
    const ready = await fetch(`http://127.0.0.1:${adminPort}/ready`).then((r) => r.status === 200, () => false);
    if (ready) break;
    if (envoy.exitCode !== null || Date.now() > deadline) throw new Error(`Envoy did not start: ${envoyErrors}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    adminURL: `http://${admin}`,
    async stop() {
      for (const child of [envoy, gateway.child, ...sims.map((s) => s.child)]) {
        child.kill('SIGTERM');
        await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
      }
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}
