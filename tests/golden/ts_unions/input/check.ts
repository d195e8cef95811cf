async function check() {
  await tools.app.combine({ id: "a", target: { user: "u" }, both: { a: "x", b: 1 },
    base_and_variants: { kind: "k", x: 1 }, with_unknown: { anything: true },
    union_array: ["a", true], intersect_union: 1 });
  await tools.app.combine({ id: 2, target: { team: "t" } });
  // @ts-expect-error allOf needs both parts
  await tools.app.combine({ both: { a: "x" } });
  // @ts-expect-error neither variant
  await tools.app.combine({ target: { group: "g" } });
  // @ts-expect-error the base property is required in every variant
  await tools.app.combine({ base_and_variants: { x: 1 } });
}
