async function check(x: unknown) {
  // @ts-expect-error false admits no value
  await tools.app.vague({ false_schema: 1 });
  await tools.app.vague({ false_schema: undefined as never, not_schema: x, conditional: x, true_schema: x,
    dynamic: x, empty: x, format_only: x });
}
