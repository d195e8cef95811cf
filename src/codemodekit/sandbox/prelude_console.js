// Console module of the sandbox prelude: compiled on the first console call of a run.
// Uses only what the core hands over in `api` (captured before user code), never a global.
//
// Storage is bounded here, in JavaScript, so a log flood cannot exhaust the heap: the first
// entries (the head, up to half the budget) and the most recent ones (the tail) are kept,
// and one "truncated" marker entry between them counts what was dropped.
(function (api) {
  "use strict";
  const apply = api.apply;
  const stringify = api.stringify;
  const charCodeAt = api.charCodeAt;
  const slice = api.slice;
  const toWellFormed = api.toWellFormed;
  const maxEntries = api.logEntries;
  const maxBytes = api.logBytes;

  const utf8Length = (s) => {
    let n = 0;
    const len = s.length;
    for (let i = 0; i < len; i++) {
      const c = apply(charCodeAt, s, [i]);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < len) {
        n += 4;
        i++;
      } else n += 3;
    }
    return n;
  };

  // One entry may use at most half the byte budget, so the head or the tail can hold it.
  const entryCap = maxBytes > 1 ? maxBytes >> 1 : 1;
  const clip = (message) => {
    if (message.length * 3 <= entryCap) return message;
    const total = message.length;
    let cut = total > entryCap ? apply(slice, message, [0, entryCap]) : message;
    if (utf8Length(cut) <= entryCap && cut.length === total) return message;
    const room = entryCap - 40; // for the suffix below
    if (room <= 0) return apply(slice, message, [0, entryCap]);
    while (cut.length > 0 && utf8Length(cut) > room) {
      cut = apply(slice, cut, [0, (cut.length * 0.9) | 0]);
    }
    const last = cut.length ? apply(charCodeAt, cut, [cut.length - 1]) : 0;
    if (last >= 0xd800 && last <= 0xdbff) cut = apply(slice, cut, [0, cut.length - 1]);
    return cut + " … [" + (total - cut.length) + " more characters]";
  };

  const format = (v) => {
    const t = typeof v;
    if (t === "string") return v;
    if (t === "undefined") return "undefined";
    if (t === "number" || t === "boolean") return "" + v;
    if (t === "bigint") return apply(api.bigintToString, v, []) + "n";
    if (t === "symbol") return apply(api.symbolToString, v, []);
    if (t === "function") {
      let n = "";
      try {
        const d = api.getOwnPropertyDescriptor(v, "name");
        if (d && typeof d.value === "string") n = d.value;
      } catch (_) {
        n = "";
      }
      return n ? "[Function: " + n + "]" : "[Function (anonymous)]";
    }
    if (v === null) return "null";
    if (api.isToolPromise(v)) return api.toolPromiseText(v);
    try {
      if (v instanceof api.Error) return apply(api.errorToString, v, []);
    } catch (_) {
      return "[Error]";
    }
    try {
      const s = stringify(v);
      if (typeof s === "string") return s;
    } catch (_) {
      // A BigInt or a cycle: say so in place rather than losing the whole line.
      try {
        const seen = new api.WeakSet();
        const s = stringify(v, (_key, value) => {
          if (typeof value === "bigint") return apply(api.bigintToString, value, []) + "n";
          if (typeof value === "object" && value !== null) {
            if (apply(api.weakSetHas, seen, [value])) return "[Circular]";
            apply(api.weakSetAdd, seen, [value]);
          }
          return value;
        });
        if (typeof s === "string") return s;
      } catch (_) {
        // fall through
      }
    }
    try {
      return api.String(v);
    } catch (_) {
      return "[object]";
    }
  };

  const head = api.record(); // i -> [level, text, bytes]
  let headCount = 0;
  let headBytes = 0;
  let headOpen = true;
  const tail = api.record();
  let tailStart = 0;
  let tailEnd = 0;
  let tailBytes = 0;
  let omitted = 0;
  let omittedBytes = 0;

  const evictTail = () => {
    const old = tail[tailStart];
    delete tail[tailStart];
    tailStart++;
    tailBytes -= old[2];
    omitted++;
    omittedBytes += old[2];
  };

  const write = (level, args) => {
    let line = "";
    for (let i = 0; i < args.length; i++) line += (i > 0 ? " " : "") + format(args[i]);
    const text = clip(apply(toWellFormed, line, []));
    const bytes = utf8Length(text);
    const entry = api.setPrototypeOf([level, text, bytes], null);
    if (headOpen) {
      if (headCount < (maxEntries + 1) >> 1 && headBytes + bytes <= maxBytes >> 1) {
        head[headCount++] = entry;
        headBytes += bytes;
        return;
      }
      headOpen = false; // later entries go to the tail, even small ones: order is kept
    }
    tail[tailEnd++] = entry;
    tailBytes += bytes;
    while (
      tailEnd > tailStart &&
      (tailEnd - tailStart > maxEntries - headCount || tailBytes > maxBytes - headBytes)
    ) {
      evictTail();
    }
  };

  const logs = () => {
    // Room for the marker: at most maxEntries entries in total.
    // Take the room from the longer side so that a small budget still keeps both the
    // oldest entries and the newest one.
    while (omitted > 0 && headCount + (tailEnd - tailStart) + 1 > maxEntries) {
      const tailCount = tailEnd - tailStart;
      if (headCount > tailCount) {
        headCount--;
        omitted++;
        omittedBytes += head[headCount][2];
      } else if (tailCount > 0) evictTail();
      else break;
    }
    let out = "";
    const add = (level, message) => {
      out += (out ? "," : "") + "[" + stringify(level) + "," + stringify(message) + "]";
    };
    for (let i = 0; i < headCount; i++) add(head[i][0], head[i][1]);
    if (omitted > 0) {
      add(
        "truncated",
        "… " + omitted + (omitted === 1 ? " entry" : " entries") + " (" + omittedBytes +
          " bytes) omitted …",
      );
    }
    for (let i = tailStart; i < tailEnd; i++) add(tail[i][0], tail[i][1]);
    return "[" + out + "]";
  };

  // Streaming, when the host asked for it: the entries written since the last drain, in
  // order. Entries dropped before a drain are one "truncated" entry. While the run goes the
  // stream is bounded by the same budget as the logs (a marker says when it is held back);
  // at the end (`final`) the retained entries not yet handed over follow. An entry's
  // sequence number is its index in `head`, or `headCount` + its index in `tail`.
  let cursor = 0; // the sequence number of the next entry to hand over
  let streamed = 0;
  let streamedBytes = 0;
  let held = false;
  const since = (final) => {
    const total = headCount + tailEnd;
    if (cursor >= total || (held && !final)) return "";
    let out = "";
    const add = (level, message) => {
      out += (out ? "," : "") + "[" + stringify(level) + "," + stringify(message) + "]";
    };
    while (cursor < total) {
      const k = cursor - headCount;
      const gap = k >= 0 && k < tailStart ? tailStart - k : 0;
      const entry = gap > 0 ? undefined : k < 0 ? head[cursor] : tail[k];
      if (!final) {
        const bytes = gap > 0 ? 0 : entry[2];
        if (streamed + 1 > maxEntries || streamedBytes + bytes > maxBytes) {
          held = true;
          add("truncated", "… more console output than the log limits allow; the run's " +
            "last entries follow when it ends …");
          break;
        }
        streamed++;
        streamedBytes += bytes;
      }
      if (gap > 0) {
        add("truncated", "… " + gap + (gap === 1 ? " entry" : " entries") + " omitted …");
        cursor += gap;
      } else {
        add(entry[0], entry[1]);
        cursor++;
      }
    }
    return "[" + out + "]";
  };

  const m = api.record();
  m.write = write;
  m.logs = logs;
  m.since = since;
  m.format = format;
  return api.freeze(m);
})
