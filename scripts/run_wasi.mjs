// Runs a wasm32-wasip1 program under node's built-in WASI (node 20+):
//   node --no-warnings scripts/run_wasi.mjs [--dir HOST[:GUEST]]... <program.wasm> [args...]
// stdout/stderr are the process's own; the exit status is the program's. The program sees no
// files unless a directory is preopened: `--dir HOST` gives it the host directory HOST under
// the same path (so an absolute host path inside it works as an argument), `--dir HOST:GUEST`
// under the path GUEST.
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { WASI } from "node:wasi";
import { argv, exit } from "node:process";

const usage = "usage: run_wasi.mjs [--dir HOST[:GUEST]]... <program.wasm> [args...]";
const rest = argv.slice(2);
const preopens = {};
while (rest[0] === "--dir") {
  const spec = rest[1];
  if (!spec) {
    console.error(`run_wasi: --dir needs a directory; ${usage}`);
    exit(2);
  }
  const colon = spec.indexOf(":");
  const host = resolve(colon < 0 ? spec : spec.slice(0, colon));
  const guest = colon < 0 ? host : spec.slice(colon + 1);
  preopens[guest] = host;
  rest.splice(0, 2);
}
const [program, ...args] = rest;
if (!program) {
  console.error(usage);
  exit(2);
}
const wasi = new WASI({ version: "preview1", args: [program, ...args], env: {}, preopens, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(program));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
exit(wasi.start(instance));
