async function check() {
  await tools.app.lists({
    tags: ["a"], matrix: [[1, 2], [3]], untyped: [1, "x", null], none: [],
    pair: ["a", 1], head_rest: ["a", true, false], open_tuple: ["a"],
    unions: ["a", 1], nullable_items: ["a", null],
  });
  await tools.app.lists({ open_tuple: ["a", 1, { more: true }] });
  // @ts-expect-error a closed pair has two elements
  await tools.app.lists({ pair: ["a", 1, 2] });
  // @ts-expect-error rest elements are booleans
  await tools.app.lists({ head_rest: ["a", 1] });
  // @ts-expect-error items: false admits only []
  await tools.app.lists({ none: [1] });
  await tools.app.legacy_tuple({ point: [1, 2], loose: ["a", 1, 2] });
  // @ts-expect-error legacy additionalItems: false closes the tuple
  await tools.app.legacy_tuple({ point: [1, 2, 3] });
}
