async function check() {
  const r = await tools.app.tree({
    root: { value: "a", children: [{ value: "b" }], parent: { value: "p" } },
    labels: [{ name: "l" }], weird: "https://x", anchored: { x: 1, y: 2 },
    json: { a: [1, "x", null, { b: true }] }, self: { self: {} },
  });
  const id: number | undefined = r.structuredContent?.node?.id;
  // @ts-expect-error Node.value is required
  await tools.app.tree({ root: { children: [] } });
  // @ts-expect-error Json admits no functions
  await tools.app.tree({ json: { f: () => 1 } });
  return id;
}
