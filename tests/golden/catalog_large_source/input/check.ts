async function check() {
  await tools.github.issues_get_comments({ owner: "o" });
  await tools.github.teams_delete_keys({ owner: "o", page: 2 });
  await tools.github.misc3({});
  await tools.small.ping({});
}
