// Failure module of the sandbox prelude: compiled only when a run fails, to describe the
// rejection (or the unserializable result) for the host as JSON text.
// Uses only what the core hands over in `api` (captured before user code), never a global.
// Reading a thrown object's name, message or stack may run user getters: that happens
// here, inside a port call, under the compute limit, and every read is guarded.
(function (api) {
  "use strict";
  const apply = api.apply;
  const stringify = api.stringify;

  const text = (v) => {
    try {
      return apply(api.toWellFormed, api.String(v), []);
    } catch (_) {
      return "";
    }
  };
  const read = (e, key) => {
    try {
      const v = e[key];
      return v === undefined ? "" : text(v);
    } catch (_) {
      return "";
    }
  };

  const describe = (e) => {
    const meta = typeof e === "object" && e !== null ? api.toolInfo(e) : undefined;
    if (meta !== undefined) {
      return (
        '{"k":"tool","id":' + meta.id + ',"code":' + stringify(meta.code) +
        ',"message":' + stringify(meta.message) + ',"tool":' + stringify(meta.tool) +
        ',"source":' + stringify(meta.source) + ',"site":' + stringify(meta.site) + "}"
      );
    }
    if ((typeof e === "object" && e !== null) || typeof e === "function") {
      let isError = false;
      try {
        isError = e instanceof api.Error;
      } catch (_) {
        isError = false;
      }
      const name = read(e, "name");
      let message = read(e, "message");
      const readHint = api.awaitHint();
      if (readHint !== "" && name === "TypeError") {
        message += " (did you forget `await`? " + readHint + ")";
      }
      if (isError || name || message) {
        return (
          '{"k":"error","name":' + stringify(name) + ',"message":' + stringify(message) +
          ',"stack":' + stringify(read(e, "stack")) + "}"
        );
      }
    }
    return '{"k":"value","text":' + stringify(text(api.load("console").format(e))) + "}";
  };

  const unserializable = (error, value) => {
    const why =
      error === undefined
        ? "a " + typeof value + " is not a JSON value"
        : api.load("console").format(error);
    return '{"k":"unserializable","why":' + stringify(text(why)) + "}";
  };

  const m = api.record();
  m.describe = describe;
  m.unserializable = unserializable;
  return api.freeze(m);
})
