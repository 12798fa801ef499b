// Starts kvgate-test-upstream replicas and kvgate for the SDK tests, on
// 127.0.0.1 with kernel-chosen ports; everything is stopped by PID.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
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
