async function check() {
  await tools.app.nullables({ name: null, count: null, obj: null, list: null, multi: true, ref_or_null: null });
  await tools.app.nullables({ name: "n", count: 1, obj: { a: "x" }, list: ["a"], multi: 1, ref_or_null: { id: "i" } });
  // @ts-expect-error required even when nullable
  await tools.app.nullables({});
  // @ts-expect-error not null-able
  await tools.app.nullables({ name: "n", multi: null });
}
