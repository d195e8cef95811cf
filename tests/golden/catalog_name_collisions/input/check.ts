async function check() {
  await tools["a-b"].get_item({ id: "1" });
  await tools["a-b"].getItem({ n: 1 });
  await tools["a-b"].get({ x: true });
  await tools.a_b.get_item({ flag: true });
  await tools["A B"].Promise({});
  await tools["tool result"].x({ r: "s" });
  // @ts-expect-error a_b.get_item takes a flag, not an id
  await tools.a_b.get_item({ id: "1" });
}
