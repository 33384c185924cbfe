"""``copy_to``: a session (or one branch) under new ids; interrupted functions as rendered."""

from __future__ import annotations

import re

from graph import TOP, ConversationGraph, MemoryStore, steps_to_messages, visible

ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-Z]{26}(?![0-9A-Za-z])")


def _two_branches() -> tuple[ConversationGraph, str, str]:
    g = ConversationGraph(MemoryStore(), "orig")
    g.append({"role": "user", "content": "task"})
    answer = g.append({"role": "assistant", "content": "first"})
    with g.function("job", {"x": 1}) as fn:
        g.append({"role": "user", "content": "inside"})
        fn.output = "done"
    main = g.append({"role": "user", "content": "main"}).id
    g.fork(answer.id)
    branch = g.append({"role": "user", "content": "branch"}).id
    return g, main, branch


def test_copy_has_new_ids_and_the_same_messages() -> None:
    g, main, _ = _two_branches()
    copy = g.copy_to(g.store, "copy", head=main)
    assert not {n.id for n in copy.nodes()} & {n.id for n in g.nodes()}
    messages = copy.to_openai()
    assert [m.get("content") for m in messages] == [
        "task",
        "first",
        "inside",
        None,
        "done",
        "main",
    ]
    fn = next(n for n in copy.nodes() if n.kind == "function")
    assert fn.finish is not None and fn.finish.last in copy
    assert [n.payload.content for n in copy.children(fn.id)] == ["inside"]  # type: ignore[union-attr]
    assert len(copy) == 5  # the other branch stayed behind


def test_copy_sees_what_another_writer_appended() -> None:
    g, _, _ = _two_branches()
    other = ConversationGraph(g.store, g.session)
    late = other.append({"role": "assistant", "content": "late"}).id
    assert late not in g
    copy = g.copy_to(g.store, "copy", head=late)
    assert [m["content"] for m in copy.to_openai()][-2:] == ["branch", "late"]


def test_layer_text_names_the_copied_ids() -> None:
    g = ConversationGraph(MemoryStore(), "orig")
    ids = [g.append({"role": "user", "content": str(i)}).id for i in range(3)]
    inner = g.add_layer("collapse", ids[:2], None)
    text = f'expand_layer("{inner.id}") and inspect_node("{ids[0]}"); fn_{ids[1]}'
    outer = g.add_layer(
        "compact",
        ids,
        [{"role": "user", "content": text}],
        meta={"first": ids[0], "unrelated": "0" * 26},
    )
    copy = g.copy_to(g.store, "copy")
    new_inner, new_outer = copy.layers()
    new_ids = [n.id for n in copy.nodes()]
    assert new_outer.builds_on == (new_inner.id,) and new_outer.covers == tuple(new_ids)
    assert new_outer.layer.replacement == [
        {
            "role": "user",
            "content": f'expand_layer("{new_inner.id}") and inspect_node("{new_ids[0]}"); '
            f"fn_{new_ids[1]}",
        }
    ]
    assert new_outer.layer.meta == {"first": new_ids[0], "unrelated": "0" * 26}
    assert outer.layer.replacement[0]["content"] == text  # the original is untouched


def test_an_interrupted_function_says_so() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "user", "content": "hi"})
    handle = g.start_function("job", {"x": 1}, frame=TOP)
    g.finish_function(handle, status="interrupted", error="interrupted: its process is gone")
    messages = steps_to_messages(visible(g.state, g.head_of(TOP)))
    assert messages[-1]["content"] == (
        f"[function job (node {handle.id}) never finished: interrupted: its process is gone]"
    )
    assert g.get(handle.id).status == "interrupted"
