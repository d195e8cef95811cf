async function check() {
  const found = await tools.github.search_issues({ q: "is:open" });
  const first = found.structuredContent?.items[0];
  const names: string[] = (first?.labels ?? []).map((l) => l.name);
  const created = await tools.github.create_issue({ repo: "a/b", title: "t" });
  const n: number | undefined = created.structuredContent?.number;
  await tools["deployment-api"].deploy({ service: "s", env: "staging" });
  const services = await tools["deployment-api"]["list-services"]({});
  const text = services.content.find((b) => b.type === "text");
  let parsed: unknown = services.structuredContent;
  if (parsed === undefined && text && text.type === "text") {
    try { parsed = JSON.parse(text.text); } catch { parsed = text.text; }
  }
  let failure = "";
  try {
    await tools.app.lookup({ id: "1" });
  } catch (e) {
    const err = e as ToolCallError;
    if (err.code === "TOOL_DENIED") failure = `${err.source}.${err.tool}: ${err.message}`;
  }
  // @ts-expect-error env is an enum
  await tools["deployment-api"].deploy({ service: "s", env: "dev" });
  return { names, n, parsed, failure };
}
