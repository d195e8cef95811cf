async function check() {
  await tools.app.fine({ a: "x" });
  // @ts-expect-error quarantined tools are not declared
  await tools.app.remote_ref({});
}
