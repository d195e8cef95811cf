async function check() {
  const echoed = await tools.everything.echo({ message: "hi" });
  const weather = await tools.everything["get-structured-content"]({ location: "Chicago" });
  const t: number | undefined = weather.structuredContent?.temperature;
  const sum = await tools.everything["get-sum"]({ a: 1, b: 2 });
  // @ts-expect-error location is an enum of three cities
  await tools.everything["get-structured-content"]({ location: "Paris" });
  return { echoed: echoed.content, t, sum: sum.content };
}
