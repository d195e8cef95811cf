// Ask tsserver (the language server VS Code runs) for the diagnostics of some files, as an
// editor does when it opens them: `open` each, then `geterr`.
// Usage: node tsserver_diagnostics.cjs <path-to-typescript> FILE...
// Prints: {"config": "<tsconfig.json the first file belongs to>",
//          "diagnostics": {"<file>": ["<name>(line,col): TS1234 message", ...]}}
"use strict";
const { spawn } = require("child_process");
const path = require("path");

const [typescript, ...files] = process.argv.slice(2);
const server = spawn(
  process.execPath,
  [path.join(typescript, "lib", "tsserver.js"), "--disableAutomaticTypingAcquisition"],
  { stdio: ["pipe", "pipe", "inherit"] },
);
const result = { config: null, diagnostics: Object.fromEntries(files.map((f) => [f, []])) };
let seq = 0;
let pending = Buffer.alloc(0);

function send(command, args) {
  server.stdin.write(JSON.stringify({ seq: ++seq, type: "request", command, arguments: args }) + "\n");
}

function handle(message) {
  if (message.type === "response" && message.command === "projectInfo") {
    result.config = message.body.configFileName;
  } else if (message.type === "event" && ["syntaxDiag", "semanticDiag"].includes(message.event)) {
    const name = path.basename(message.body.file);
    for (const d of message.body.diagnostics) {
      result.diagnostics[message.body.file].push(
        `${name}(${d.start.line},${d.start.offset}): TS${d.code} ${d.text}`,
      );
    }
  } else if (message.type === "event" && message.event === "requestCompleted") {
    process.stdout.write(JSON.stringify(result));
    server.kill();
  }
}

// tsserver frames each message as `Content-Length: N\r\n\r\n` + N bytes of JSON.
server.stdout.on("data", (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  for (;;) {
    const text = pending.toString("latin1");
    const header = /Content-Length: (\d+)\r\n\r\n/.exec(text);
    if (!header) return;
    const start = header.index + header[0].length;
    const length = Number(header[1]);
    if (pending.length < start + length) return;
    handle(JSON.parse(pending.subarray(start, start + length).toString("utf8")));
    pending = pending.subarray(start + length);
  }
});

for (const file of files) send("open", { file });
send("projectInfo", { file: files[0], needFileNameList: false });
send("geterr", { files, delay: 0 });
