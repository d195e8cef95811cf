// Random module of the sandbox prelude: Math.random's generator, compiled at a run's first
// Math.random() (a sandbox zygote compiles it ahead of every fork).
// Uses only what the core hands over in `api` (captured before user code), never a global.
// The core passes the run's seed, four 32-bit words the host drew for this run alone
// (ADR 0035). xoshiro128**: two steps per double, 27 + 26 bits of their outputs.
(function (api) {
  "use strict";
  const imul = api.imul;
  return (words) => {
    let r0 = words[0], r1 = words[1], r2 = words[2], r3 = words[3];
    if ((r0 | r1 | r2 | r3) === 0) r0 = 1; // the one state xoshiro never leaves
    return api.named("codemode$random", () => {
      let t = imul(r1, 5), u = r1 << 9;
      const hi = imul((t << 7) | (t >>> 25), 9) >>> 5;
      r2 ^= r0; r3 ^= r1; r1 ^= r2; r0 ^= r3; r2 ^= u; r3 = (r3 << 11) | (r3 >>> 21);
      t = imul(r1, 5);
      u = r1 << 9;
      const lo = imul((t << 7) | (t >>> 25), 9) >>> 6;
      r2 ^= r0; r3 ^= r1; r1 ^= r2; r0 ^= r3; r2 ^= u; r3 = (r3 << 11) | (r3 >>> 21);
      return (hi * 67108864 + lo) / 9007199254740992;
    });
  };
})
