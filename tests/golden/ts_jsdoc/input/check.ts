async function check() {
  await tools.app.documented({ query: "a", limit: 5, ratio: 0.5, when: "x", old: "o", titled: "t", blob: "", multi_line: "" });
  await tools.app.old_tool({});
}
