// CodeModeKit sandbox prelude, core part (QuickJS adapter).
//
// Evaluated in every fresh context before any user code. Its completion value is the host
// port: a function the host keeps as a handle and calls directly; it is never stored on
// globalThis, so user code cannot reach it. Everything the prelude needs is captured here,
// before user code runs. No host callable exists in the context: tool calls and console
// lines are queued in JavaScript and the host drains them between slices.
//
// QuickJS compiles about 25 bytes of code per microsecond, and this file is compiled for
// every run. So it stays small: the console, the tool-call machinery, the failure report
// and Math.random's generator live in prelude_*.js, handed over by the host as strings
// and compiled (with the eval captured here) only when a run first needs them.
(() => {
  "use strict";
  const G = globalThis;
  const O = Object;
  const create = O.create;
  const defineProperty = O.defineProperty;
  const getOwnPropertyDescriptor = O.getOwnPropertyDescriptor;
  const getOwnPropertyNames = O.getOwnPropertyNames;
  const getPrototypeOf = O.getPrototypeOf;
  const freeze = O.freeze;
  const apply = Reflect.apply;
  const stringify = JSON.stringify;
  const NativePromise = Promise;
  const promiseThen = Promise.prototype.then;
  const NativeError = Error;
  const NativeSyntaxError = SyntaxError;
  const NativeInternalError = InternalError;
  const errorToString = Error.prototype.toString;
  const indirectEval = eval; // private: starts the program and compiles the lazy modules
  const nativeQueueMicrotask = queueMicrotask;
  const ProxyCtor = Proxy;

  const record = () => create(null);
  // Descriptors without a prototype: a polluted Object.prototype.get cannot turn them
  // into accessor descriptors (lock also runs after user code, on new error objects).
  const lock = (obj, key, value) => {
    const d = record();
    d.value = value;
    d.writable = d.enumerable = d.configurable = false;
    return defineProperty(obj, key, d);
  };
  const named = (name, fn) => {
    const d = record();
    d.value = name;
    d.configurable = false;
    defineProperty(fn, "name", d);
    return freeze(fn);
  };

  let state = 0; // of the program's promise: 0 pending, 1 fulfilled, 2 rejected
  let outcome;

  // What the lazy modules may use: captured intrinsics only, never a global lookup.
  const api = record();
  api.apply = apply;
  api.stringify = stringify;
  api.parse = JSON.parse;
  api.create = create;
  api.record = record;
  api.lock = lock;
  api.named = named;
  api.freeze = freeze;
  api.defineProperty = defineProperty;
  api.getOwnPropertyDescriptor = getOwnPropertyDescriptor;
  api.getOwnPropertyNames = getOwnPropertyNames;
  api.setPrototypeOf = O.setPrototypeOf;
  api.Promise = NativePromise;
  api.promiseReject = Promise.reject;
  api.Error = NativeError;
  api.TypeError = TypeError;
  api.InternalError = NativeInternalError;
  api.errorToString = errorToString;
  api.String = String;
  api.toWellFormed = String.prototype.toWellFormed;
  api.charCodeAt = String.prototype.charCodeAt;
  api.slice = String.prototype.slice;
  api.indexOf = String.prototype.indexOf;
  api.lastIndexOf = String.prototype.lastIndexOf;
  api.split = String.prototype.split;
  api.parseInt = parseInt;
  api.imul = Math.imul;
  api.symbolToString = Symbol.prototype.toString;
  api.bigintToString = BigInt.prototype.toString;
  api.WeakMap = WeakMap;
  api.weakMapGet = WeakMap.prototype.get;
  api.weakMapSet = WeakMap.prototype.set;
  api.WeakSet = WeakSet;
  api.weakSetHas = WeakSet.prototype.has;
  api.weakSetAdd = WeakSet.prototype.add;
  api.toolInfo = () => undefined; // replaced by the calls module
  api.isToolPromise = () => false; // replaced by the calls module
  api.awaitHint = () => "";
  api.Proxy = Proxy;
  api.promiseThen = Promise.prototype.then;
  api.promiseFinally = Promise.prototype.finally;
  api.objectToString = O.prototype.toString;
  api.objectValueOf = O.prototype.valueOf;
  api.toStringTag = Symbol.toStringTag;
  api.logEntries = 100;
  api.logBytes = 65536;
  api.program = "";

  // ---- values crossing the bridge: JSON data, and binary only as { $bytes, mediaType } --
  // Typed arrays, ArrayBuffer, Map, Set, Date… would silently become {} or a string; they
  // are refused with the JSON path instead (brand checks, so a spoofed toStringTag cannot
  // hide one). Captured here, before user code and before the global allowlist.
  const MAX_BYTES = 4194304; // decoded bytes of one $bytes value (codemodekit.binary)
  const isArray = Array.isArray;
  const objectKeys = O.keys;
  const isView = ArrayBuffer.isView;
  const ObjectProto = O.prototype;
  const ArrayProto = Array.prototype;
  const NativeWeakMap = WeakMap;
  const weakGetNative = WeakMap.prototype.get;
  const weakSetNative = WeakMap.prototype.set;
  const getter = (proto, key) => {
    const d = proto === undefined ? undefined : getOwnPropertyDescriptor(proto, key);
    return d === undefined ? undefined : d.get;
  };
  const typedArrayName = getter(getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag);
  const brands = [
    ["ArrayBuffer", getter(ArrayBuffer.prototype, "byteLength"), []],
    [
      "SharedArrayBuffer",
      typeof SharedArrayBuffer === "function"
        ? getter(SharedArrayBuffer.prototype, "byteLength")
        : undefined,
      [],
    ],
    ["Map", getter(Map.prototype, "size"), []],
    ["Set", getter(Set.prototype, "size"), []],
    ["WeakMap", WeakMap.prototype.has, [ObjectProto]],
    ["WeakSet", WeakSet.prototype.has, [ObjectProto]],
    ["Date", Date.prototype.getTime, []],
  ];
  const brandOf = (v) => {
    if (isView(v)) {
      const name = apply(typedArrayName, v, []);
      return typeof name === "string" ? name : "DataView";
    }
    for (let i = 0; i < brands.length; i++) {
      const b = brands[i];
      if (b[1] === undefined) continue;
      try {
        apply(b[1], v, b[2]);
        return b[0];
      } catch (_) {
        // not this kind
      }
    }
    return "";
  };
  const isBase64 = (text) => {
    if (text.length % 4 !== 0) return false;
    for (let i = 0; i < text.length; i++) {
      const c = apply(String.prototype.charCodeAt, text, [i]);
      const ok =
        (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 ||
        c === 47 || (c === 61 && i >= text.length - 2);
      if (!ok) return false;
    }
    return !(text.length >= 2 && apply(String.prototype.charCodeAt, text, [text.length - 2]) === 61 &&
      apply(String.prototype.charCodeAt, text, [text.length - 1]) !== 61);
  };
  const badBytes = (v) => {
    const keys = getOwnPropertyNames(v);
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] !== "$bytes" && keys[i] !== "mediaType") {
        return "a $bytes value has only `$bytes` and `mediaType`, not `" + keys[i] + "`";
      }
    }
    const data = v.$bytes;
    if (typeof data !== "string" || !isBase64(data)) return "`$bytes` must be base64 text";
    if (((data.length / 4) | 0) * 3 > MAX_BYTES + 2) {
      return "a $bytes value holds at most " + MAX_BYTES + " bytes";
    }
    const media = v.mediaType;
    if (media !== undefined && (typeof media !== "string" || media.length > 255)) {
      return "`mediaType` must be a short string such as \"image/png\"";
    }
    return "";
  };
  const segment = (key, inArray) => {
    if (inArray) return "[" + key + "]";
    let plain = key.length > 0;
    for (let i = 0; i < key.length && plain; i++) {
      const c = apply(String.prototype.charCodeAt, key, [i]);
      plain = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 36 ||
        (i > 0 && c >= 48 && c <= 57);
    }
    return plain ? "." + key : "[" + stringify(key) + "]";
  };
  const binaryHint =
    'binary data crosses the bridge only as { $bytes: "<base64>", mediaType } (at most ' +
    MAX_BYTES + " bytes)";
  // The path of `target` inside `root` (found again only after a refusal, so the normal
  // pass keeps no bookkeeping). Bounded: a huge value may give up and say "$…".
  const pathOf = (root, target) => {
    let budget = 100000;
    const search = (v, path) => {
      if (v === target) return path;
      if (typeof v !== "object" || v === null || --budget < 0) return undefined;
      const inArray = isArray(v);
      const keys = objectKeys(v);
      for (let i = 0; i < keys.length; i++) {
        let child;
        try {
          child = v[keys[i]];
        } catch (_) {
          continue;
        }
        const found = search(child, path + segment(keys[i], inArray));
        if (found !== undefined) return found;
      }
      return undefined;
    };
    try {
      return search(root, "$") || "$…";
    } catch (_) {
      return "$…"; // nested deeper than the stack allows
    }
  };
  const dateText = (v) =>
    (v.length === 24 || v.length === 27) &&
    apply(String.prototype.charCodeAt, v, [v.length - 1]) === 90 && // Z
    apply(String.prototype.charCodeAt, v, [v.length - 14]) === 84; // T
  // JSON text of `value`, or a record { path, why } when a value is not JSON data.
  // `onPromise(v)` is told about tool-call promises met on the way.
  const toJson = (value, onPromise) => {
    let bad;
    let why = "";
    const replacer = function (key, v) {
      if (typeof v === "object") {
        if (v === null) return v;
        const proto = getPrototypeOf(v);
        if (proto === ObjectProto || proto === null) {
          if (v.$bytes !== undefined) why = badBytes(v);
          if (why !== "") why += "; " + binaryHint;
        } else if (proto !== ArrayProto) {
          if (api.isToolPromise(v)) onPromise(v);
          else {
            const brand = brandOf(v);
            if (brand === "Map" || brand === "Set" || brand === "WeakMap" || brand === "WeakSet") {
              why = "a " + brand + " is not JSON data (convert it, e.g. Object.fromEntries(m) " +
                "or [...s])";
            } else if (brand !== "") {
              why = (brand[0] === "A" ? "an " : "a ") + brand + " is not JSON data; " + binaryHint;
            }
          }
        }
        if (why !== "") bad = v;
      } else if (typeof v === "string" && dateText(v)) {
        // A Date has become its toJSON text by now: look at what the holder holds.
        const original = this[key];
        if (typeof original === "object" && original !== null && brandOf(original) === "Date") {
          why = "a Date is not JSON data (send date.toISOString())";
          bad = original;
        }
      }
      if (why !== "") throw replacer;
      return v;
    };
    try {
      return stringify(value, replacer);
    } catch (e) {
      if (e !== replacer || why === "") throw e;
      const refused = record();
      refused.path = pathOf(value, bad);
      refused.why = why;
      return refused;
    }
  };
  api.toJson = toJson;

  const sources = record();
  const modules = record();
  const load = (name) => {
    let m = modules[name];
    if (m === undefined) {
      m = apply(indirectEval(sources[name]), undefined, [api]);
      modules[name] = m;
    }
    return m;
  };
  api.load = load;

  // ---- console: five locked methods, bounded storage in the console module --------
  const consoleObject = create(O.prototype);
  const levels = ["log", "info", "warn", "error", "debug"];
  for (let i = 0; i < 5; i++) {
    const level = levels[i];
    lock(
      consoleObject,
      level,
      named("codemode$" + level, function () {
        load("console").write(level, arguments);
      }),
    );
  }
  freeze(consoleObject);

  // ---- tools: lazy namespaces; calls are queued by the calls module -----------------
  // Every name is reachable: `tools.app.then`, `tools.app.constructor`, `tools.toString.x`
  // and dotted names (`tools.crm.contacts.find` is the tool "contacts.find", as is
  // `tools.crm["contacts.find"]`). A tool reference is a callable proxy; reading a member
  // of it names the dotted tool below it. The engine's own protocols still work, told
  // apart by their arguments (a tool takes one object): `await x` calls `then` with
  // functions, JSON.stringify calls `toJSON` with a string key, and a conversion to a
  // primitive calls `toString` / `valueOf` with no arguments.
  const sites = () => load("calls"); // the call-site capture lives with the calls
  const text = (ns, path) => "[tools." + ns + (path === "" ? "" : "." + path) + "]";
  const fnMethods = record();
  fnMethods.call = Function.prototype.call;
  fnMethods.apply = Function.prototype.apply;
  fnMethods.bind = Function.prototype.bind;
  const protocol = (ref, key, args) => {
    const first = args[0];
    if (key === "then" && typeof first === "function") {
      // `await ref` (a reference, not a call) fulfils with the reference itself: resolve()
      // reads `then` once more, synchronously, and finds nothing this time.
      ref.settling = true;
      try {
        apply(first, undefined, [ref.self]);
      } finally {
        ref.settling = false;
      }
      return undefined;
    }
    if (key === "toJSON" && typeof first === "string") return undefined;
    if (args.length === 0 && key === "toString") return ref.text;
    if (args.length === 0 && key === "valueOf") return ref.self;
    return protocol; // not a protocol call
  };
  const readOnly = (handler) => {
    const refuse = named("codemode$refuse", () => false);
    handler.set = handler.defineProperty = handler.deleteProperty = refuse;
    handler.setPrototypeOf = handler.preventExtensions = refuse;
    return handler;
  };
  // One reference per (source, dotted path); `path === ""` is the namespace itself, a
  // plain (not callable, so never thenable) object.
  const references = record();
  // Ids are built from strings only: user code may have polluted what JSON.stringify reads.
  const refId = (ns, path) => ns.length + ":" + ns + "/" + path;
  const reference = (ns, path) => {
    const id = refId(ns, path);
    let ref = references[id];
    if (ref !== undefined) return ref.self;
    ref = record();
    ref.text = text(ns, path);
    ref.settling = false;
    const handler = readOnly(record());
    handler.get = named("codemode$get", (_target, key) => {
      if (typeof key !== "string") return undefined;
      if (ref.settling && key === "then") return undefined;
      if (path !== "" && fnMethods[key] !== undefined) {
        // call/apply/bind keep their Function meaning on a tool (the dotted tool "x.call"
        // stays reachable as tools.ns["x.call"]).
        if (ref[key] === undefined) {
          const native = fnMethods[key];
          ref[key] = named(key, function () {
            return apply(native, ref.self, arguments);
          });
        }
        return ref[key];
      }
      const child = path === "" ? key : path + "." + key;
      const found = reference(ns, child);
      sites().seen(ns, child);
      return found;
    });
    let target;
    if (path === "") {
      target = freeze(record()); // every write, define, delete or prototype change fails
    } else {
      target = () => undefined;
      const nameOf = record();
      nameOf.value = apply(api.slice, ref.text, [1, -1]);
      defineProperty(target, "name", nameOf);
      handler.apply = named("codemode$apply", (_target, _self, args) => {
        const dot = apply(api.lastIndexOf, path, ["."]);
        const owner = references[refId(ns, dot < 0 ? "" : apply(api.slice, path, [0, dot]))];
        const key = apply(api.slice, path, [dot + 1]);
        const answer = owner === undefined ? protocol : protocol(owner, key, args);
        if (answer !== protocol) return answer;
        return sites().call(ns, path, args[0]);
      });
    }
    ref.self = new ProxyCtor(target, handler);
    references[id] = ref;
    return ref.self;
  };
  // The root: `tools.<source>` (any name, `then` and `toString` included) is a namespace.
  const rootHandler = readOnly(record());
  // `String(tools)` and `${tools}`: every string key is a source, so the conversion is
  // answered through Symbol.toPrimitive, as printing shows it.
  const rootText = named("codemode$toPrimitive", () => "[tools]");
  const toPrimitiveKey = Symbol.toPrimitive;
  rootHandler.get = named("codemode$get", (_target, key) =>
    typeof key === "string"
      ? reference(key, "")
      : key === toPrimitiveKey
        ? rootText
        : undefined,
  );
  const tools = new ProxyCtor(freeze(record()), rootHandler);

  // ---- lockdown ---------------------------------------------------------------------
  // No code generation: the four function constructors become throwers on every path.
  const noCodegen = named("codemode$disabled", function () {
    throw new EvalError("code generation (eval, Function) is not available in the sandbox");
  });
  const fnProtos = [
    Function.prototype,
    getPrototypeOf(async function () {}),
    getPrototypeOf(function* () {}),
    getPrototypeOf(async function* () {}),
  ];
  for (let i = 0; i < 4; i++) lock(fnProtos[i], "constructor", noCodegen);

  // Only portable intrinsics stay on the global object (allowlist version 1).
  const allowed = record();
  const allowList = [
    "Object", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Math", "JSON",
    "Date", "RegExp", "Promise", "Proxy", "Reflect", "Map", "Set", "WeakMap", "WeakSet",
    "Iterator", "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray",
    "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array",
    "Float64Array", "BigInt64Array", "BigUint64Array", "Error", "AggregateError",
    "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError",
    "InternalError", "SuppressedError", "DisposableStack", "AsyncDisposableStack",
    "globalThis", "NaN", "Infinity", "undefined", "isFinite", "isNaN", "parseFloat",
    "parseInt", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent",
    "escape", "unescape", "atob", "btoa", "queueMicrotask",
  ];
  for (let i = 0; i < allowList.length; i++) allowed[allowList[i]] = true;
  const globals = getOwnPropertyNames(G);
  for (let i = 0; i < globals.length; i++) {
    if (!allowed[globals[i]]) delete G[globals[i]];
  }

  // The host turns an uncatchable error (time limit, out of memory, stack overflow) into
  // a string outside any time limit. Pin everything that conversion reads on the error
  // types it can meet, so no user code can run there.
  const stackAccessor = getOwnPropertyDescriptor(NativeError.prototype, "stack");
  lock(NativeError, "prepareStackTrace", undefined);
  lock(NativeError, "stackTraceLimit", NativeError.stackTraceLimit);
  const pinned = [InternalError.prototype, RangeError.prototype];
  for (let i = 0; i < 2; i++) {
    const p = pinned[i];
    lock(p, Symbol.toPrimitive, undefined);
    lock(p, "toString", errorToString);
    lock(p, "name", p.name);
    lock(p, "message", "");
    if (stackAccessor) {
      defineProperty(p, "stack", {
        get: stackAccessor.get,
        set: stackAccessor.set,
        enumerable: false,
        configurable: false,
      });
    }
    freeze(p);
  }

  // QuickJS consults the time limit only every 10,000 interrupt polls (loop back-edges,
  // calls), so a short loop of very long native calls could overrun compute_time_ms by
  // orders of magnitude. Before a native call on a large input, spin through enough polls
  // to force one check; small inputs pay only the length test.
  const LARGE = 65536;
  const forceTimeCheck = () => {
    for (let i = 0; i < 10001; i++);
  };
  const guard = (holder, key, isLarge) => {
    const native = holder[key];
    defineProperty(holder, key, {
      // Named codemode$… like every prelude frame, so stack mapping skips it.
      value: named("codemode$" + key, {
        [key](...args) {
          if (isLarge(this, args)) forceTimeCheck();
          return apply(native, this, args);
        },
      }[key]),
      writable: true,
      enumerable: false,
      configurable: true,
    });
  };
  const largeText = (_self, args) => typeof args[0] === "string" && args[0].length > LARGE;
  const largeThis = (self) => {
    try {
      return self !== null && self !== undefined && self.length > LARGE;
    } catch (_) {
      return false;
    }
  };
  const largeValue = (_self, args) => largeThis(args[0]);
  const typedArrayProto = getPrototypeOf(Uint8Array.prototype);
  guard(JSON, "parse", largeText);
  guard(JSON, "stringify", largeValue);
  guard(Array.prototype, "sort", largeThis);
  guard(Array.prototype, "toSorted", largeThis);
  guard(typedArrayProto, "sort", largeThis);
  guard(typedArrayProto, "toSorted", largeThis);

  // An iterator helper's next() calls the iterator below it from C without a stack check:
  // next() on 100,000 chained helpers overflowed the native stack and killed the process
  // (red-team finding; chains through generators, proxies or Iterator.from are checked).
  // Chains are capped; 1,000 levels of C frames stay well inside the stack margin.
  const MAX_HELPER_CHAIN = 1000;
  const chainDepth = new WeakMap();
  const weakGet = WeakMap.prototype.get;
  const weakSet = WeakMap.prototype.set;
  const NativeRangeError = RangeError;
  const helperProto = Iterator.prototype;
  const helpers = ["map", "filter", "take", "drop", "flatMap", "chunks", "windows"];
  for (let i = 0; i < helpers.length; i++) {
    const key = helpers[i];
    const native = helperProto[key];
    if (typeof native !== "function") continue;
    defineProperty(helperProto, key, {
      value: named("codemode$" + key, {
        [key](...args) {
          const depth = (apply(weakGet, chainDepth, [this]) || 0) + 1;
          if (depth > MAX_HELPER_CHAIN) {
            throw new NativeRangeError(
              "iterator helpers chained more than " + MAX_HELPER_CHAIN + " deep",
            );
          }
          const result = apply(native, this, args);
          if (typeof result === "object" && result !== null) {
            apply(weakSet, chainDepth, [result, depth]);
          }
          return result;
        },
      }[key]),
      writable: true,
      enumerable: false,
      configurable: true,
    });
  }

  // Math.random: seeded by init for each run (a context prepared ahead of its run, one
  // zygote's for every fork, would repeat one sequence; ADR 0035); the generator is the
  // random module. Bound and renamed, it prints as native code like the built-in.
  let seedWords, generate;
  const random = apply(fnMethods.bind, named("codemode$random", () =>
    (generate || (generate = load("random")(seedWords)))()), [undefined]);
  defineProperty(random, "name", { value: "random", configurable: true });
  defineProperty(Math, "random", { value: random, writable: true, configurable: true });

  // A throwing microtask would reach the host as a raw exception; here it ends the run
  // as an uncaught exception instead, like an unhandled error in other runtimes.
  const fail = (e) => {
    if (state === 0) {
      state = 2;
      outcome = e;
    }
  };
  defineProperty(G, "queueMicrotask", {
    value: named("queueMicrotask", function (callback) {
      if (typeof callback !== "function") {
        throw new TypeError("queueMicrotask: the argument must be a function");
      }
      apply(nativeQueueMicrotask, undefined, [
        () => {
          try {
            apply(callback, undefined, []);
          } catch (e) {
            fail(e);
          }
        },
      ]);
    }),
    writable: true,
    enumerable: false,
    configurable: true,
  });
  lock(G, "console", consoleObject);
  lock(G, "tools", tools);

  // ---- the host port ----------------------------------------------------------------
  // One function per lowered call site: `[source, tool, line, column, …]` (the position
  // of `tools` in the program, for the caret of a failing call).
  const directCalls = (sites) => {
    const table = record();
    for (let i = 0, k = 0; i + 3 < sites.length; i += 4, k++) {
      const ns = sites[i];
      const name = sites[i + 1];
      const where = sites[i + 2] + ":" + sites[i + 3];
      table[k] = named("codemode$direct", (args) => load("calls").direct(ns, name, where, args));
    }
    return freeze(table);
  };
  const commands = record();
  let streaming = false; // the host takes console entries as they are written
  // The lazy modules' sources, handed over once when the context is prepared (ahead of
  // any run: passing 26 KB of text into the engine costs about 0.1 ms).
  commands.modules = (consoleSource, callsSource, failureSource, randomSource) => {
    sources.console = consoleSource;
    sources.calls = callsSource;
    sources.failure = failureSource;
    sources.random = randomSource;
    return "";
  };
  // A module compiled into a prepared context ahead of any run (a sandbox zygote loads
  // the calls module once; every fork inherits it instead of compiling it per run).
  commands.preload = (name) => {
    if (sources[name] === undefined) return "no such module";
    load(name);
    return "";
  };
  commands.init = (settings) => {
    const s = api.parse(settings);
    api.logEntries = s.logEntries;
    api.logBytes = s.logBytes;
    streaming = s.stream === true;
    const w = s.seed; // four 32-bit words from the host's os.urandom
    seedWords = [w[0] | 0, w[1] | 0, w[2] | 0, w[3] | 0];
    return "";
  };
  commands.start = (source) => {
    api.program = source; // positions in stacks refer to this text (the calls module reads it)
    // Indirect eval inside a try: a synchronous throw of any value stays in JavaScript.
    let program;
    try {
      program = indirectEval(source);
      // `[wrapper, sites]`: the compiler lowered awaited calls of named tools to entries
      // of a direct-call table, which the wrapper takes as its parameter.
      if (isArray(program)) program = apply(program[0], undefined, [directCalls(program[1])]);
    } catch (e) {
      if (e instanceof NativeSyntaxError && state === 0) {
        const stack = e.stack;
        return (
          '{"k":"syntax","message":' + stringify(apply(api.toWellFormed, e.message, [])) +
          ',"stack":' + stringify(typeof stack === "string" ? stack : "") + "}"
        );
      }
      fail(e);
      return '{"k":"started"}';
    }
    const onFulfilled = (value) => {
      if (state === 0) {
        state = 1;
        outcome = value;
      }
    };
    if (program instanceof NativePromise) apply(promiseThen, program, [onFulfilled, fail]);
    else onFulfilled(program);
    return '{"k":"started"}';
  };
  // One line per call after the state: JSON text never holds a raw newline, and the host
  // parses each call on its own, so one call it cannot decode fails alone.
  commands.drain = (max) => {
    const calls = modules.calls === undefined ? "" : modules.calls.drain(max);
    const logs = streaming && modules.console !== undefined ? modules.console.since(state !== 0) : "";
    return '{"s":' + state + (logs === "" ? "" : ',"l":' + logs) + "}" + calls;
  };
  commands.settle = (batch) => {
    load("calls").settle(batch);
    return "";
  };
  commands.result = (maxUnits) => {
    if (state === 0) return '{"k":"pending"}';
    if (state === 2) return load("failure").describe(outcome);
    const value = outcome;
    outcome = undefined;
    if (value === undefined) return '{"k":"undefined"}';
    let json;
    try {
      // Counts tool-call promises in the value: each would silently become {}.
      let promises = 0;
      json = toJson(value, () => promises++);
      if (promises > 0) api.returnedPromises(promises);
      if (typeof json === "object") {
        const why = "at " + json.path + ": " + json.why;
        return '{"k":"unserializable","why":' + stringify(apply(api.toWellFormed, why, [])) + "}";
      }
    } catch (e) {
      return load("failure").unserializable(e, value);
    }
    if (typeof json !== "string") return load("failure").unserializable(undefined, value);
    // UTF-8 bytes are never fewer than UTF-16 units: too many units is already too large.
    if (json.length > maxUnits) return '{"k":"toolarge","units":' + json.length + "}";
    return "J" + json;
  };
  // The console's entries, after the calls module's hints (level "hint"), which the host
  // takes out as the run's warnings.
  // When streaming, a second line holds the entries not yet handed over (read first: the
  // final read-out may drop entries to make room for its marker).
  commands.logs = () => {
    const stream = streaming && modules.console !== undefined ? modules.console.since(true) : "";
    const logs = modules.console === undefined ? "[]" : modules.console.logs();
    const hints = modules.calls === undefined ? "" : modules.calls.hints();
    const all = hints === "" ? logs :
      "[" + hints + (logs === "[]" ? "]" : "," + apply(api.slice, logs, [1]));
    return streaming ? all + "\n" + (stream === "" ? "[]" : stream) : all;
  };
  freeze(commands);

  return named("codemode$port", function (command, a, b, c, d) {
    // Never let a user value escape to the host: the host would stringify it untimed.
    try {
      // slice(0) flattens a rope string: the binding cannot convert ropes.
      return apply(api.slice, commands[command](a, b, c, d), [0]);
    } catch (e) {
      // Out of memory shows up as an InternalError, or as null when even that failed.
      let oom = e === null;
      try {
        oom = oom || (e instanceof NativeInternalError && e.message === "out of memory");
      } catch (_) {
        oom = false;
      }
      return oom ? '{"k":"fault","oom":true}' : '{"k":"fault"}';
    }
  });
})()
