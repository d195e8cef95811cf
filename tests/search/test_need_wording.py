"""What a need's wording says beyond its terms (docs/adr/0034), through ``search_catalog``:
see versus change from the tools' own hints, the path's scope, verbs the catalog does not
name, words it never uses, "stop doing", "one of", "all" with a change, yes/no questions."""

from __future__ import annotations

from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.providers.base import Discovery, ToolSpec
from codemodekit.search.search import search_catalog


def _tool(name: str, description: str, operation: str | None = None) -> ToolSpec:
    annotations: dict[str, Any] = {}
    provenance: dict[str, Any] = {}
    if operation is not None:
        method = operation.split()[0]
        annotations["readOnlyHint"] = method == "GET"
        provenance["operation"] = operation
    return ToolSpec(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {}},
        annotations=annotations,
        provenance=provenance,
    )


def _catalog(*tools: ToolSpec) -> Catalog:
    return Catalog.build({"api": Discovery(tools=tools)})


def _first(catalog: Catalog, query: str) -> str:
    return search_catalog(catalog, query).hits[0].name


SECRETS = _catalog(
    _tool("list_secrets", "List secrets of the user's workspaces.", "GET /user/secrets"),
    _tool("put_secret", "Put a secret in the user's workspaces.", "PUT /user/secrets/{name}"),
    _tool("get_secret_value", "Get a secret value.", "GET /user/secrets/{name}/value"),
    _tool("delete_patterns", "Delete custom patterns in bulk.", "DELETE /patterns"),
    _tool("list_patterns", "List custom patterns.", "GET /patterns"),
    _tool("open_ticket", "Open a ticket.", "POST /tickets"),
)


def test_a_verb_the_catalog_does_not_name_is_read_as_a_change() -> None:
    # "save" and "wipe" are neither tool verbs nor synonyms of one: the lexicon classes
    # them as changing something, so the tools that only read rank below the ones that
    # change, and "all patterns" is one change, not a listing.
    assert _first(SECRETS, "save a secret in my workspaces") == "put_secret"
    assert _first(SECRETS, "wipe all custom patterns") == "delete_patterns"
    # A verb that perceives stays a read.
    assert _first(SECRETS, "inspect the secrets of my workspaces") == "list_secrets"


def test_a_need_that_asks_to_see_prefers_tools_that_only_read() -> None:
    catalog = _catalog(
        _tool("budget_edit", "Edit the budget of a team.", "PATCH /teams/{t}/budget"),
        _tool("budget_view", "View the budget of a team.", "GET /teams/{t}/budget"),
    )
    assert _first(catalog, "what is the budget of this team") == "budget_view"
    assert _first(catalog, "change the budget of a team") == "budget_edit"
    # Tools that declare nothing: the rule stays out of the way (ties break by address).
    bare = _catalog(
        _tool("budget_edit", "Edit the budget of a team."),
        _tool("budget_view", "View the budget of a team."),
    )
    assert _first(bare, "what is the budget of this team") == "budget_edit"


def test_the_path_tells_the_scope() -> None:
    catalog = _catalog(
        _tool("limit_one", "Get the retention limit.", "GET /enterprises/{e}/cache/limit"),
        _tool("limit_two", "Get the retention limit.", "GET /orgs/{o}/cache/limit"),
    )
    assert _first(catalog, "cache retention limit of an enterprise") == "limit_one"
    assert _first(catalog, "cache retention limit of the orgs") == "limit_two"


def test_a_word_the_catalog_never_uses_finds_its_synonym_as_a_weak_match() -> None:
    catalog = _catalog(
        _tool("get_picture", "Get the image of a pet.", "GET /pets/{id}/image"),
        _tool("get_owner", "Get the owner of a pet.", "GET /pets/{id}/owner"),
    )
    response = search_catalog(catalog, "show a photograph")
    assert response.hits[0].name == "get_picture"
    # Found only through the lexicon: the response still admits it is a weak match.
    assert response.weak


def test_stop_doing_something_undoes_it() -> None:
    catalog = _catalog(
        _tool("stop_server", "Stop a running server.", "POST /servers/{s}/stop"),
        _tool("remove_share", "Remove a repository from a shared secret.", "DELETE /s/{r}"),
        _tool("add_share", "Add a repository to a shared secret.", "PUT /s/{r}"),
    )
    assert _first(catalog, "stop sharing a secret with a repository") == "remove_share"


def test_one_of_many_is_not_a_listing() -> None:
    catalog = _catalog(
        _tool("list_runners", "List self-hosted runners.", "GET /runners"),
        _tool("get_runner", "Get a self-hosted runner.", "GET /runners/{id}"),
    )
    assert _first(catalog, "details of one self-hosted runner") == "get_runner"
    assert _first(catalog, "all self-hosted runners") == "list_runners"


def test_a_yes_no_question_prefers_a_check() -> None:
    catalog = _catalog(
        _tool("team_list_repos", "Repositories a team has access to.", "GET /t/{t}/repos"),
        _tool("team_repo_check", "Whether a team has access to a repository.", "GET /t/{t}/r/{r}"),
    )
    assert _first(catalog, "does a team have access to a repository") == "team_repo_check"


def test_a_phrasal_verb_stands_for_the_action_it_means() -> None:
    catalog = _catalog(
        _tool("get_gist", "Get a gist.", "GET /gists/{id}"),
        _tool("delete_gist", "Delete a gist.", "DELETE /gists/{id}"),
        _tool("star_gist", "Star a gist.", "PUT /gists/{id}/star"),
    )
    # "throw away" is related to "remove" in the lexicon; without it the destructive tool
    # ranks below the others for a need that names no destructive word.
    assert _first(catalog, "throw away a gist") == "delete_gist"


def test_a_plural_word_after_a_or_an_is_not_a_listing() -> None:
    catalog = _catalog(
        _tool("list_secrets", "List the secrets of workspaces.", "GET /secrets"),
        _tool("secret_put", "Keep a secret of workspaces.", "PUT /secrets/{name}"),
    )
    # "Workspaces" is plural, but the need names one secret ("a"): no listing is asked for
    # (and "store" is mostly a noun: the lexicon gives no verb kind to go by).
    assert _first(catalog, "store a workspaces secret") == "secret_put"


def test_words_of_one_family_meet_through_the_lexicon() -> None:
    catalog = _catalog(
        _tool("workflow_run_details", "Get a workflow run.", "GET /runs/{id}"),
        _tool("workflow_run_ok", "Approve a workflow run.", "POST /runs/{id}/approve"),
        _tool("policy", "The approval policy of an organization.", "GET /policy"),
    )
    # "approval" and "approve" share no stem or suffix rule; WordNet's derivation links
    # join them (the catalog knows "approval", so this is not the unknown-word rule).
    assert _first(catalog, "approval of a workflow run") == "workflow_run_ok"


def test_a_leading_word_the_catalog_never_uses_is_read_as_the_verb_it_is() -> None:
    catalog = _catalog(
        _tool("stack_list", "List the items of a stack.", "GET /stacks/{s}/items"),
        _tool("stack_add", "Add items to a stack.", "POST /stacks/{s}/items"),
    )
    # "append" is no word of the catalog and is mostly a verb: the need changes something,
    # so "items" (plural) does not make it a listing. A catalog word before a noun may be
    # a noun itself ("commit history"), so that reading needs the word to be unknown.
    assert _first(catalog, "append items to a stack") == "stack_add"


def test_an_action_word_used_as_a_noun_names_no_action() -> None:
    from tests.fixtures.search.catalog_fixture import fixture_catalog_built

    catalog = fixture_catalog_built()
    # "run" after "workflow" is a thing, not the action: no re-run tool answers.
    names = [h.name for h in search_catalog(catalog, "the latest workflow run", limit=3).hits]
    assert not any("re_run" in n for n in names), names
    # Leading the need, it is the action.
    assert "re_run" in search_catalog(catalog, "run a workflow again").hits[0].name


def test_a_need_that_only_names_a_thing_asks_to_see_it() -> None:
    catalog = _catalog(
        _tool("delivery_redeliver", "Redeliver a webhook delivery.", "POST /deliveries/{d}"),
        _tool("delivery_show", "Show a webhook delivery.", "GET /deliveries/{d}"),
        _tool("note_edit", "Edit the notes of a team.", "PATCH /teams/{t}/notes"),
        _tool("note_list", "List the notes of a team.", "GET /teams/{t}/notes"),
    )
    # No verb: a noun phrase opened by a determiner or a possessive, or by a plural noun
    # (an imperative verb is never in its -s form), names something to see.
    assert _first(catalog, "a webhook delivery") == "delivery_show"
    assert _first(catalog, "our webhook delivery") == "delivery_show"
    assert _first(catalog, "notes of a team") == "note_list"
    # A verb still says what it says.
    assert _first(catalog, "redeliver a webhook delivery") == "delivery_redeliver"


def test_either_action_of_a_create_or_update_tool_is_its_action() -> None:
    catalog = _catalog(
        _tool("secret_create_or_update", "Create or update a secret.", "PUT /secrets/{s}"),
        _tool("secret_set_repos", "Set the repositories of a secret.", "PUT /secrets/{s}/r"),
    )
    # "update" and its synonyms ("set", "edit") name the second action of the tool named
    # "create or update" as much as the first action of the one named "set".
    assert _first(catalog, "update a secret") == "secret_create_or_update"
    assert _first(catalog, "edit a secret") == "secret_create_or_update"
    assert _first(catalog, "set the repositories of a secret") == "secret_set_repos"


def test_a_verb_before_a_determiner_that_does_not_read_asks_for_a_change() -> None:
    catalog = _catalog(
        _tool("ticket_details", "Details of a ticket, open or closed.", "GET /tickets/{t}"),
        _tool("ticket_update", "Update a ticket: close it or reopen it.", "PATCH /tickets/{t}"),
        _tool("ticket_list", "List tickets, open or closed.", "GET /tickets"),
    )
    # "close" is a catalog verb no tool here is named by, so the tools' hints do not say
    # what it does; a word followed by "a"/"the"/"my" stands as a verb, and one that is
    # not a read verb asks for a change.
    assert _first(catalog, "close a ticket") == "ticket_update"
    assert _first(catalog, "close my ticket") == "ticket_update"
    # A read verb in that place still reads.
    assert _first(catalog, "show a ticket") == "ticket_details"


def test_a_verb_with_off_or_away_after_its_object_separates() -> None:
    catalog = _catalog(
        _tool("labels_add", "Add labels to a runner.", "POST /runners/{r}/labels"),
        _tool("labels_list", "List the labels of a runner.", "GET /runners/{r}/labels"),
        _tool("labels_remove", "Remove a label from a runner.", "DELETE /runners/{r}/labels/{l}"),
    )
    # "take X off", "pull X off", "take X away": the need removes, whatever the verb.
    assert _first(catalog, "take a label off a runner") == "labels_remove"
    assert _first(catalog, "pull that label off the runner") == "labels_remove"
    assert _first(catalog, "take the label away from a runner") == "labels_remove"
    # A read verb keeps its reading.
    assert _first(catalog, "list the labels switched off on a runner") == "labels_list"


def test_a_need_led_by_a_word_that_is_no_verb_asks_to_see() -> None:
    catalog = _catalog(
        _tool("cache_limit_apply", "Cache size limit of an enterprise.", "PUT /e/{e}/limit"),
        _tool("cache_limit_show", "Cache size limit of an enterprise.", "GET /e/{e}/limit"),
    )
    # "maximum" is neither a catalog action nor a verb of the lexicon, and a noun follows
    # it: the need is a noun phrase, and names something to see.
    assert _first(catalog, "maximum cache size of an enterprise") == "cache_limit_show"
    # A verb there still says what it says.
    assert _first(catalog, "apply a cache size limit to an enterprise") == "cache_limit_apply"


def test_a_yes_no_question_about_many_things_is_not_a_listing() -> None:
    catalog = _catalog(
        _tool("alerts_list", "List the alerts of a repository.", "GET /r/{r}/alerts"),
        _tool(
            "alerts_check", "Check whether alerts are enabled for a repository.", "GET /r/{r}/on"
        ),
    )
    assert _first(catalog, "are alerts enabled for this repository") == "alerts_check"
    # "are there": the answer is the things themselves.
    assert _first(catalog, "are there alerts for this repository") == "alerts_list"


def test_undoing_something_is_also_done_by_the_un_verbs() -> None:
    catalog = _catalog(
        _tool("comment_delete", "Delete a comment.", "DELETE /comments/{c}"),
        _tool("comment_pin", "Pin a comment to the top of an issue.", "PUT /comments/{c}/pin"),
        _tool(
            "comment_unpin", "Unpin a comment from the top of an issue.", "DELETE /comments/{c}/p"
        ),
    )
    # "stop showing X at the top": an undo; "unpin" (un + a catalog action) undoes as
    # much as "delete" does, and the rest of the need tells them apart.
    assert _first(catalog, "stop showing a comment at the top of an issue") == "comment_unpin"


def test_stop_someone_from_doing_something_undoes_it() -> None:
    catalog = _catalog(
        _tool("stop_server", "Stop a running server of a team.", "POST /servers/{s}/stop"),
        _tool("remove_team_access", "Remove teams from the agent policy.", "DELETE /policy/teams"),
        _tool("add_team_access", "Add teams to the agent policy.", "POST /policy/teams"),
    )
    # The gerund may come after the object and "from": the need still undoes something.
    assert _first(catalog, "stop some teams from using the agent") == "remove_team_access"


def test_ending_something_may_be_done_by_deleting_it() -> None:
    catalog = _catalog(
        _tool("placeOrder", "Place an order for a pet.", "POST /store/order"),
        _tool("deleteOrder", "Delete purchase order by identifier.", "DELETE /store/order/{o}"),
        _tool("getOrderById", "Find purchase order by identifier.", "GET /store/order/{o}"),
    )
    # No tool cancels; "cancel" ends the order, and the tool that deletes it is not
    # ranked down as a destructive tool the need did not ask for.
    assert _first(catalog, "cancel a purchase order") == "deleteOrder"
