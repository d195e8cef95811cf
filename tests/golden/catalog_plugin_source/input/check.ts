async function check() {
  const made = await tools["team-tracker"].create_issue({ title: "Broken build" });
  const id: number | undefined = made.structuredContent?.id;
  // @ts-expect-error: `title` is required
  await tools["team-tracker"].create_issue({ body: "x" });
  await tools["team-search"].search({ query: "deploy" });
  return id;
}
