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
  // Every read and call captures the raw stack; it is cut down to the user's frames only
  // for a call that fails (most never need it).
  const rawStack = api.named("codemode$site", () => {
    const stack = new api.Error().stack;
    return typeof stack === "string" ? stack : "";
  });
  const userFrames = (rest) => {
    for (;;) {
      const nl = apply(indexOf, rest, ["\n"]);
      if (nl < 0 || apply(indexOf, apply(slice, rest, [0, nl]), ["codemode$"]) < 0) break;
      rest = apply(slice, rest, [nl + 1]);
    }
    return rest;
  };

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
  let lineCount = 0;
  const offsetOf = (line, column) => {
    if (lineStarts === undefined) {
      lineStarts = api.record();
      lineStarts[0] = 0;
      lineCount = 1;
      const text = api.program;
      for (let at = apply(indexOf, text, ["\n"]); at >= 0; at = apply(indexOf, text, ["\n", at + 1])) {
        lineStarts[lineCount++] = at + 1;
      }
    }
    return line >= 1 && line <= lineCount ? lineStarts[line - 1] + column - 1 : -1;
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
  const seenSites = api.record(); // reference -> the raw stack of its latest read
  const seen = api.named("codemode$seen", (ns, path) => {
    seenSites[ns.length + ":" + ns + "/" + path] = rawStack();
  });
  // A call's site, unresolved: [the call's raw stack, the raw stack of the reference's read].
  const siteOf = api.named("codemode$siteOf", (ns, path) => {
    const id = ns.length + ":" + ns + "/" + path;
    const read = seenSites[id];
    if (read !== undefined) delete seenSites[id];
    return api.setPrototypeOf([rawStack(), read], null);
  });
  // A direct call knows where it is (`line:column` of `tools` in the program): its stack's
  // first user frame gets that position (QuickJS puts a call at its last argument).
  const atSite = (frames, where) => {
    const nl = apply(indexOf, frames, ["\n"]);
    const head = nl < 0 ? frames : apply(slice, frames, [0, nl]);
    const at = apply(api.lastIndexOf, head, ["<input>:"]);
    if (at < 0) return "    at <anonymous> (<input>:" + where + ")\n" + frames;
    const close = apply(indexOf, head, [")", at]);
    return apply(slice, head, [0, at + 8]) + where + (close < 0 ? "" : apply(slice, head, [close])) +
      (nl < 0 ? "" : apply(slice, frames, [nl]));
  };
  const siteText = (raw) => {
    const site = userFrames(raw[0]);
    if (raw[2] !== undefined) return atSite(site, raw[2]);
    if (raw[1] === undefined) return site;
    const read = userFrames(raw[1]);
    const a = frameOf(site);
    const b = frameOf(read);
    return a[0] === b[0] && a[1] === b[1] && isCallee(read) ? read : site;
  };

  const toolError = (info, rawSite, id) => {
    const site = siteText(rawSite);
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

  // ---- hints for common mistakes (a forgotten `await`) ------------------------------
  // A call returns a proxy of its promise: `await`, then/catch/finally and Promise.all work
  // as usual (they read `then`, which marks the promise observed); any other property read
  // is a mistake (`tools.x.y({}).content`) and is noted. At the end of the run the host gets
  // short hints: such reads, failed calls nobody awaited or caught, calls still running.
  const MAX_HINTS = 8;
  // Records, not arrays: an indexed write to an array could meet a setter user code put
  // on Array.prototype.
  const hintList = api.record();
  let hintCount = 0;
  const hintSeen = api.record();
  const hint = (text) => {
    if (hintSeen[text] === undefined && hintCount < MAX_HINTS) {
      hintSeen[text] = true;
      hintList[hintCount++] = text;
    }
  };
  const watched = new api.WeakMap(); // proxy -> its watch record
  const failedUnobserved = api.record(); // watch records of rejected calls (checked at the end)
  let failedCount = 0;
  let readHint = ""; // the latest property read on a promise, for the failure's message
  const promiseThen = api.promiseThen;
  const promiseFinally = api.promiseFinally;
  // One handler and one set of methods for every call's proxy (a call only adds its watch
  // record): the methods find the record through the proxy they are called on, the handler
  // through the promise it wraps, like the native methods work on any promise.
  const watchOf = new api.WeakMap(); // promise -> its watch record
  const receiver = (proxy, method) => {
    const w = apply(api.weakMapGet, watched, [proxy]);
    if (w === undefined) {
      throw new api.TypeError("Promise.prototype." + method + " called on an incompatible receiver");
    }
    w.observed = true;
    return w.promise;
  };
  const methods = api.record();
  methods.then = api.named("then", function (onFulfilled, onRejected) {
    return apply(promiseThen, receiver(this, "then"), [onFulfilled, onRejected]);
  });
  methods.catch = api.named("catch", function (onRejected) {
    return apply(promiseThen, receiver(this, "catch"), [undefined, onRejected]);
  });
  methods.finally = api.named("finally", function (onFinally) {
    return apply(promiseFinally, receiver(this, "finally"), [onFinally]);
  });
  methods.constructor = api.Promise;
  methods.toString = api.objectToString;
  methods.toLocaleString = api.objectToString;
  methods.valueOf = api.objectValueOf;
  api.freeze(methods);
  const handler = api.record();
  handler.get = api.named("codemode$promiseGet", (target, key) => {
    if (typeof key !== "string") return key === api.toStringTag ? "Promise" : undefined;
    const w = apply(api.weakMapGet, watchOf, [target]);
    const method = methods[key];
    if (method !== undefined) {
      if (key === "then" || key === "catch" || key === "finally") w.observed = true;
      return method;
    }
    if (key === "toJSON") return undefined;
    readHint =
      "`." + key + "` was read from the promise of " + w.address + ", not from its result";
    hint(readHint + ": did you forget `await`?");
    return undefined;
  });
  handler.set = handler.defineProperty = handler.deleteProperty = api.named(
    "codemode$refuse",
    () => false,
  );
  api.freeze(handler);
  const watch = (promise, address) => {
    const w = api.record();
    w.address = address;
    w.observed = false;
    w.failed = "";
    w.settled = false;
    w.promise = promise;
    const proxy = new api.Proxy(promise, handler);
    apply(api.weakMapSet, watched, [proxy, w]);
    apply(api.weakMapSet, watchOf, [promise, w]);
    return [proxy, w];
  };
  api.isToolPromise = (v) => apply(api.weakMapGet, watched, [v]) !== undefined;
  api.toolPromiseText = (v) => {
    const w = apply(api.weakMapGet, watched, [v]);
    hint("a tool call's promise was logged instead of its result (" + w.address +
      "): did you forget `await`?");
    return "Promise { <" + (w.settled ? "settled" : "pending") + " " + w.address + "> }";
  };
  api.returnedPromises = (n) => {
    hint("the returned value holds " + n + " tool call promise" + (n === 1 ? "" : "s") +
      " (each becomes {}): did you forget `await` (`await Promise.all([...])`)?");
  };
  api.awaitHint = () => readHint;
  const failed = (w, code, message) => {
    w.failed = code + ": " + message;
    if (failedCount < 64) failedUnobserved[failedCount++] = w;
  };
  const hints = () => {
    for (let i = 0; i < failedCount; i++) {
      const w = failedUnobserved[i];
      if (!w.observed) {
        const why = w.failed.length > 200 ? apply(slice, w.failed, [0, 199]) + "…" : w.failed;
        hint(w.address + " failed (" + why + ") but nothing awaited or caught it: " +
          "did you forget `await`?");
      }
    }
    const ids = api.getOwnPropertyNames(pending);
    for (let i = 0; i < ids.length; i++) {
      const w = pending[ids[i]][5];
      if (!w.observed) {
        hint(w.address + " was still running when the run ended and was cancelled " +
          "(nothing awaited it): did you forget `await`?");
      }
    }
    let out = "";
    for (let i = 0; i < hintCount; i++) {
      out += (i > 0 ? "," : "") + '["hint",' + stringify(hintList[i]) + "]";
    }
    return out;
  };

  // The arguments as JSON text, or why they are not JSON: [json, problem, badPath].
  const encoded = (args) => {
    let json;
    let problem = "";
    let badPath = "";
    try {
      json = args === undefined ? "{}" : api.toJson(args, () => undefined);
      if (typeof json === "object" && json !== null) {
        problem = "at " + json.path + ": " + json.why;
        badPath = json.path;
      } else if (typeof json !== "string") problem = "a " + typeof args + " is not a JSON value";
    } catch (e) {
      problem = api.load("console").format(e);
    }
    const out = api.record();
    out.json = json;
    out.problem = problem;
    out.badPath = badPath;
    return out;
  };
  const refused = (ns, name, problem, badPath) => {
    const address = "tools" + accessor(ns) + accessor(name);
    const info = api.record();
    info.code = "TOOL_INPUT_INVALID";
    info.message = "the arguments for " + address + " are not JSON-serializable: " + problem;
    if (badPath !== "") {
      info.details = api.record();
      info.details.path = badPath;
    }
    info.tool = address;
    info.source = ns;
    return info;
  };

  const call = api.named("codemode$call", (ns, name, args) => {
    const site = siteOf(ns, name);
    const e = encoded(args);
    if (e.problem) {
      const info = refused(ns, name, e.problem, e.badPath);
      const watchedReject = watch(
        apply(api.promiseReject, api.Promise, [toolError(info, site, 0)]),
        info.tool,
      );
      watchedReject[1].settled = true;
      failed(watchedReject[1], info.code, info.message);
      return watchedReject[0];
    }
    const id = ++nextId;
    const slot = api.setPrototypeOf([undefined, undefined, site, ns, name, undefined], null);
    const promise = new api.Promise((resolve, reject) => {
      slot[0] = resolve;
      slot[1] = reject;
    });
    const watchedCall = watch(promise, "tools" + accessor(ns) + accessor(name));
    slot[5] = watchedCall[1];
    pending[id] = slot;
    outbox[outEnd++] = "[" + id + "," + stringify(ns) + "," + stringify(name) + "," + e.json + "]";
    return watchedCall[0];
  });

  // A call the compiler saw awaited on the spot (`await tools.a.b(x)`, see compiler/calls.py):
  // its site is known (`where`), its promise is native and observed from the start, so it
  // needs no proxy, no read of the reference and no hint.
  const direct = api.named("codemode$direct", (ns, name, where, args) => {
    const site = api.setPrototypeOf([rawStack(), undefined, where], null);
    const e = encoded(args);
    if (e.problem) {
      const info = refused(ns, name, e.problem, e.badPath);
      return apply(api.promiseReject, api.Promise, [toolError(info, site, 0)]);
    }
    const id = ++nextId;
    const w = api.record();
    w.address = "tools" + accessor(ns) + accessor(name);
    w.observed = true;
    w.failed = "";
    w.settled = false;
    const slot = api.setPrototypeOf([undefined, undefined, site, ns, name, w], null);
    const promise = new api.Promise((resolve, reject) => {
      slot[0] = resolve;
      slot[1] = reject;
    });
    w.promise = promise;
    pending[id] = slot;
    outbox[outEnd++] = "[" + id + "," + stringify(ns) + "," + stringify(name) + "," + e.json + "]";
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
    slot[5].settled = true;
    failed(slot[5], info.code, info.message);
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
      slot[5].settled = true;
      if (item[1] === 1) slot[0](item[2]);
      else {
        failed(slot[5], item[2].code, item[2].message);
        slot[1](toolError(item[2], slot[2], item[0]));
      }
    }
  };

  const m = api.record();
  m.call = call;
  m.direct = direct;
  m.seen = seen;
  m.drain = drain;
  m.settle = settle;
  m.hints = hints;
  return api.freeze(m);
})
