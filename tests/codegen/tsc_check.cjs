// Type-check several independent groups of files with the real TypeScript compiler in one
// Node process (lib.d.ts is parsed once and shared), as `tsc --noEmit --strict` would.
// Usage: node tsc_check.cjs <path-to-typescript> < groups.json
//   groups.json: [["a/tools.d.ts", "a/check.ts"], ["a/tools.github.d.ts"], ...]
// Prints: [{"files": [...], "errors": ["file(line,col): TS1234: message", ...]}, ...]
"use strict";
const ts = require(process.argv[2]);
const fs = require("fs");

const options = {
  noEmit: true,
  strict: true,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  types: [],
  skipLibCheck: false,
};
const cache = new Map();
const base = ts.createCompilerHost(options);
const host = {
  ...base,
  getSourceFile(fileName, languageVersion, onError) {
    const shared = fileName.includes("node_modules/typescript/lib/");
    if (shared && cache.has(fileName)) return cache.get(fileName);
    const file = base.getSourceFile(fileName, languageVersion, onError);
    if (shared && file) cache.set(fileName, file);
    return file;
  },
};

const groups = JSON.parse(fs.readFileSync(0, "utf8"));
const results = groups.map((files) => {
  const program = ts.createProgram(files, options, host);
  const errors = ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (!d.file) return `TS${d.code}: ${text}`;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    return `${d.file.fileName}(${line + 1},${character + 1}): TS${d.code}: ${text}`;
  });
  return { files, errors };
});
process.stdout.write(JSON.stringify(results));
