// Runs a wasm32-wasip1 program under node's built-in WASI (node 20+):
//   node --no-warnings scripts/run_wasi.mjs <program.wasm> [args...]
// stdout/stderr are the process's own; the exit status is the program's.
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import { argv, exit } from "node:process";

const [program, ...args] = argv.slice(2);
if (!program) {
  console.error("usage: run_wasi.mjs <program.wasm> [args...]");
  exit(2);
}
const wasi = new WASI({ version: "preview1", args: [program, ...args], env: {}, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(program));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
exit(wasi.start(instance));
