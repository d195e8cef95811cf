async function check() {
  await tools.app.literals({ version: "v1", state: "it's \"quoted\"", level: -3, mixed: null,
    negative: -1, shape: { kind: "circle", r: [1, 2] }, unicode: "café", only_null: null });
  // @ts-expect-error not a member of the enum
  await tools.app.literals({ version: "v1", state: "merged" });
  // @ts-expect-error const
  await tools.app.literals({ version: "v2" });
  // @ts-expect-error an empty enum admits nothing
  await tools.app.literals({ version: "v1", none: "x" });
}
