// Tool-call module of the sandbox prelude: compiled on the first tool call of a run.
// Uses only what the core hands over in `api` (captured before user code), never a global.
//
// A call serializes its arguments at once (so later mutation cannot change them), takes
// the next call id, queues `[id, source, tool, arguments]` for the host and returns a
// promise the host settles in a later slice. Arguments that are not JSON (BigInt, a cycle,
// a function) reject the call here with TOOL_INPUT_INVALID; the host never sees it.
(function (api) {
  "use strict";
  const apply = api.apply;
  const stringify = api.stringify;
  const slice = api.slice;
  const indexOf = api.indexOf;
  const charCodeAt = api.charCodeAt;

  // Parsed from host JSON: plain data, frozen all the way down so code cannot alter it.
  const deepFreeze = (v) => {
    if (typeof v === "object" && v !== null) {
      const keys = api.getOwnPropertyNames(v);
      for (let i = 0; i < keys.length; i++) deepFreeze(v[keys[i]]);
      api.freeze(v);
    }
    return v;
  };

  class ToolCallError extends api.Error {
    constructor(message, code, tool, source, upstreamCode, details) {
      super(message);
      api.lock(this, "code", code);
      api.lock(this, "tool", tool);
      api.lock(this, "source", source);
      // The upstream's own code (an HTTP status, an MCP/JSON-RPC error code, a ToolError
      // code), so code can tell a 404 from a 429; undefined when there is none.
      api.lock(this, "upstreamCode", upstreamCode);
      api.lock(this, "details", deepFreeze(details || api.create(null)));
    }
  }
  api.lock(ToolCallError.prototype, "name", "ToolCallError");
  api.freeze(ToolCallError.prototype);
  api.freeze(ToolCallError);

  const infos = new api.WeakMap(); // error -> what the host needs if it goes uncaught
  api.toolInfo = (e) => apply(api.weakMapGet, infos, [e]);

  const isIdentifier = (s) => {
    if (s.length === 0) return false;
    for (let i = 0; i < s.length; i++) {
      const c = apply(charCodeAt, s, [i]);
      const alpha = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 36;
      if (!alpha && !(i > 0 && c >= 48 && c <= 57)) return false;
    }
    return true;
  };
  const accessor = (s) => (isIdentifier(s) ? "." + s : "[" + stringify(s) + "]");

  // The stack at the user's call site: a fresh Error's stack minus the prelude's frames.
  const callSite = api.named("codemode$site", () => {
    let rest = new api.Error().stack;
    if (typeof rest !== "string") return "";
    for (;;) {
      const nl = apply(indexOf, rest, ["\n"]);
      if (nl < 0 || apply(indexOf, apply(slice, rest, [0, nl]), ["codemode$"]) < 0) break;
      rest = apply(slice, rest, [nl + 1]);
    }
    return rest;
  });

  // Where the failing call is: QuickJS attributes a call to the position of the last
  // sub-expression it evaluated (an argument such as `before.c`), but a member read is
  // attributed to the start of its expression. So the reference's read (`tools.fs.write`)
  // records its site, and the call uses it when it is the same frame of the same stack.
  const frameOf = (stack) => {
    const nl = apply(indexOf, stack, ["\n"]);
    const head = nl < 0 ? stack : apply(slice, stack, [0, nl]);
    const paren = apply(indexOf, head, [" ("]);
    return [paren < 0 ? "" : apply(slice, head, [0, paren]), nl < 0 ? "" : apply(slice, stack, [nl])];
  };
  // The program offset of a 1-based line and column (line starts are found once).
  let lineStarts;
  const offsetOf = (line, column) => {
    if (lineStarts === undefined) {
      lineStarts = [0];
      const text = api.program;
      for (let at = apply(indexOf, text, ["\n"]); at >= 0; at = apply(indexOf, text, ["\n", at + 1])) {
        lineStarts[lineStarts.length] = at + 1;
      }
    }
    return line >= 1 && line <= lineStarts.length ? lineStarts[line - 1] + column - 1 : -1;
  };
  // Whether the member chain starting at the site's position is directly called, as in
  // `tools.fs.write(…)` (not `const f = tools.fs.write;`, read for a later call).
  const isCallee = (site) => {
    const head = frameOf(site)[0] === "" ? "" : apply(slice, site, [0, apply(indexOf, site + "\n", ["\n"])]);
    const colon = apply(api.lastIndexOf, head, [":"]);
    const colon2 = apply(api.lastIndexOf, head, [":", colon - 1]);
    const line = api.parseInt(apply(slice, head, [colon2 + 1, colon]), 10);
    const column = api.parseInt(apply(slice, head, [colon + 1]), 10);
    const text = api.program;
    let at = offsetOf(line, column);
    if (at < 0) return false;
    let depth = 0;
    for (; at < text.length; at++) {
      const c = apply(charCodeAt, text, [at]);
      if (depth > 0) {
        if (c === 91) depth++; // [
        else if (c === 93) depth--; // ]
        continue;
      }
      if (c === 40) return true; // (
      if (c === 91) depth = 1;
      else if (c === 63 && apply(charCodeAt, text, [at + 1]) === 46) at++; // ?.
      else if (!(c === 46 || c === 36 || c === 95 || c <= 32 || (c >= 48 && c <= 57) ||
                 (c >= 65 && c <= 90) || (c >= 97 && c <= 122))) {
        return false;
      }
    }
    return false;
  };
  const seenSites = api.record(); // reference -> the site of its latest read
  const seen = api.named("codemode$seen", (ns, path) => {
    seenSites[ns.length + ":" + ns + "/" + path] = callSite();
  });
  const siteOf = api.named("codemode$siteOf", (ns, path) => {
    const site = callSite();
    const id = ns.length + ":" + ns + "/" + path;
    const read = seenSites[id];
    if (read === undefined) return site;
    delete seenSites[id];
    const a = frameOf(site);
    const b = frameOf(read);
    return a[0] === b[0] && a[1] === b[1] && isCallee(read) ? read : site;
  });

  const toolError = (info, site, id) => {
    const err = new ToolCallError(
      info.message, info.code, info.tool, info.source, info.upstreamCode, info.details,
    );
    try {
      err.stack = site; // where the user called the tool, not where the host answered
    } catch (_) {
      // keep the engine's stack
    }
    const meta = api.record();
    meta.id = id;
    meta.site = site;
    meta.code = info.code;
    meta.message = info.message;
    meta.tool = info.tool;
    meta.source = info.source;
    apply(api.weakMapSet, infos, [err, meta]);
    return err;
  };

  const pending = api.record(); // id -> [resolve, reject, site]
  const outbox = api.record(); // queue index -> "[id, source, tool, arguments]" JSON text
  let outStart = 0;
  let outEnd = 0;
  let nextId = 0;

  const call = api.named("codemode$call", (ns, name, args) => {
    const site = siteOf(ns, name);
    let json;
    let problem = "";
    try {
      json = args === undefined ? "{}" : stringify(args);
      if (typeof json !== "string") problem = "a " + typeof args + " is not a JSON value";
    } catch (e) {
      problem = api.load("console").format(e);
    }
    if (problem) {
      const address = "tools" + accessor(ns) + accessor(name);
      const info = api.record();
      info.code = "TOOL_INPUT_INVALID";
      info.message = "the arguments for " + address + " are not JSON-serializable: " + problem;
      info.tool = address;
      info.source = ns;
      return apply(api.promiseReject, api.Promise, [toolError(info, site, 0)]);
    }
    const id = ++nextId;
    const slot = api.setPrototypeOf([undefined, undefined, site, ns, name], null);
    const promise = new api.Promise((resolve, reject) => {
      slot[0] = resolve;
      slot[1] = reject;
    });
    pending[id] = slot;
    outbox[outEnd++] = "[" + id + "," + stringify(ns) + "," + stringify(name) + "," + json + "]";
    return promise;
  });

  // At most `max` calls per slice, so a flood of calls never floods the host at once;
  // the rest stay queued here for the next slices.
  const drain = (max) => {
    let out = "";
    for (let n = 0; n < max && outStart < outEnd; n++) {
      out += "\n" + outbox[outStart];
      delete outbox[outStart++];
    }
    return out;
  };

  // A result the engine cannot parse on its stack (nested too deeply for stack_bytes)
  // rejects its own call; out of memory still ends the run.
  const unparsable = (line, e) => {
    if (e === null || (e instanceof api.InternalError && e.message === "out of memory")) throw e;
    const id = api.parseInt(apply(slice, line, [1]), 10);
    const slot = pending[id];
    if (slot === undefined) return;
    delete pending[id];
    const address = "tools" + accessor(slot[3]) + accessor(slot[4]);
    const info = api.record();
    info.code = "TOOL_RESULT_INVALID";
    let why;
    try {
      why = apply(api.errorToString, e, []);
    } catch (_) {
      why = "it could not be parsed";
    }
    info.message =
      "the result of " + address + " could not be read in the sandbox: " + why +
      " (nested too deeply for stack_bytes?)";
    info.tool = address;
    info.source = slot[3];
    slot[1](toolError(info, slot[2], 0));
  };

  // batch: one item per line, each the JSON text of
  // [id, 1, value] or [id, 0, {code, message, tool, source}]
  const settle = (batch) => {
    const lines = apply(api.split, batch, ["\n"]);
    for (let i = 0; i < lines.length; i++) {
      let item;
      try {
        item = api.parse(lines[i]);
      } catch (e) {
        unparsable(lines[i], e);
        continue;
      }
      const slot = pending[item[0]];
      if (slot === undefined) continue;
      delete pending[item[0]];
      if (item[1] === 1) slot[0](item[2]);
      else slot[1](toolError(item[2], slot[2], item[0]));
    }
  };

  const m = api.record();
  m.call = call;
  m.seen = seen;
  m.drain = drain;
  m.settle = settle;
  return api.freeze(m);
})
