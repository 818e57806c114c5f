// What the Node.js tests of `lfmvox serve` share (tests/clients, tests/browser): a demo checkpoint written
// by lfmvox-make-checkpoint, a server started on a free loopback port, and the ok/FAIL runner.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

// The demo LFM2.5-Audio checkpoint tests/server_test.cc uses, written to DIR; `steer` = [text, voice]
// makes greedy decoding speak `text` (lfmvox-make-checkpoint --steer-tts).
export function demoCheckpoint(makeCheckpoint, dataDir, dir, steer = null) {
  mkdirSync(dir, { recursive: true });
  const args = ['lfm25-audio', '--size', 'demo', '--tokenizer', path.join(dataDir, 'tokenizer/tokenizer.json'), '--out', dir];
  if (steer) args.push('--steer-tts', steer[0], '--voice', steer[1]);
  execFileSync(makeCheckpoint, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  return dir;
}

// Starts `lfmvox serve --model MODEL --port 0 ARGS...`; resolves with {child, port} once it says ready.
export function serve(lfmvox, model, args = []) {
  const child = spawn(lfmvox, ['serve', '--model', model, '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    let port = 0;
    child.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) port = Number(m[1]);
      if (port && log.includes('lfmvox serve: ready')) resolve({ child, port });
    });
    child.on('exit', (code) => reject(new Error(`lfmvox serve exited ${code}: ${log}`)));
  });
}

// test(name, fn) runs one named check and prints ok or FAIL with the stack; finish() prints the counts
// and returns the exit code.
export function testRunner() {
  let failures = 0, passed = 0;
  return {
    async test(name, fn) {
      try {
        await fn();
        ++passed;
        console.log(`ok   ${name}`);
      } catch (e) {
        ++failures;
        console.log(`FAIL ${name}: ${e.stack || e}`);
      }
    },
    finish() {
      console.log(`${passed} passed, ${failures} failed`);
      return failures ? 1 : 0;
    },
  };
}
