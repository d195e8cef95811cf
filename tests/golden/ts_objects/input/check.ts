async function check() {
  const ok = await tools.app.create_user({ name: "a", "x-trace-id": "t", implicit: 1 });
  const v: unknown = ok.structuredContent;
  await tools.app.create_user({
    name: "a", "x-trace-id": "t", implicit: null, age: 3, address: { street: "s", "zip code": "1" },
    $meta: { any: 1 }, default: "d", 123: 4, nothing: {}, anything: [1],
  });
  // @ts-expect-error name is required
  await tools.app.create_user({ "x-trace-id": "t", implicit: 1 });
  // @ts-expect-error address.street is required
  await tools.app.create_user({ name: "a", "x-trace-id": "t", implicit: 1, address: {} });
  // @ts-expect-error an empty closed object takes no keys
  await tools.app.empty({ a: 1 });
  await tools.app.empty({});
  await tools.app.free_form({ whatever: [1, 2] });
  return v;
}
