async function check() {
  await tools.app.maps({
    labels: { a: "x" }, open: { id: "i", extra: 1 }, closed: { id: "i" },
    coherent: { a: "x", b: "y" }, optional_coherent: { b: "y" }, incoherent: { n: 1, s: "x" },
    patterns: { "x-a": "s", "n-b": 2 }, patterns_and_props: { flag: true, "s-a": "x" },
    nested: { a: { b: [1, 2] } },
  });
  // @ts-expect-error additionalProperties is a string
  await tools.app.maps({ labels: { a: 1 } });
  // @ts-expect-error closed objects reject unknown keys in literals
  await tools.app.maps({ closed: { id: "i", extra: 1 } });
  // @ts-expect-error nested values are integer arrays
  await tools.app.maps({ nested: { a: { b: ["x"] } } });
}
