"""Context managers: the abstract contract, the default truncator over a model's window,
the registry by name, and managers built from a global block and per-agent overrides
(dict and YAML). Applied to stored dialogs, they never change what is stored."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.compression import (
    ContextConfig,
    ContextManager,
    ContextManagerRegistry,
    DefaultContextManager,
    MessageContextManager,
    context_window,
    estimate_tokens,
    register_context_manager,
    register_context_window,
)
from mindstore.compression.manager_config import DEFAULT_MANAGERS, deep_merge
from mindstore.compression.managers import SAFETY_BUFFER, TRUNCATION_PREFIX
from mindstore.compression.model_context_sizes import (
    KNOWN_CONTEXT_WINDOWS,
    forget_context_window,
)
from mindstore.errors import ConfigurationError, MindstoreError, ValidationError
from mindstore.model.messages import SystemMessage, UserMessage, message_to_dict
from mindstore.model.parts import TextPart

SEED_YAML = """
# applies to every agent in the tactic
global:
  context_manager:
    type: default        # built-in - no registration needed
    max_tokens: 128000   # optional; auto-detected if omitted

agent_configs:
  - name: cheap_agent
    model_name: gpt-4o-mini
    context_manager:     # per-agent override (deep-merged with global)
      type: default
      max_tokens: 16000

  - name: no_prune_agent
    model_name: gpt-4o
    context_manager:     # explicitly disable for this agent
      type: null
"""


def text_message(mid: str, text: str) -> UserMessage:
    return UserMessage(id=mid, content=[TextPart(text=text)])


def as_dicts(messages):
    return [message_to_dict(m) for m in messages]


class KeepLast(ContextManager):
    """A custom manager: the first message and the last `keep` others."""

    name = "keep_last"

    def __init__(
        self, model_name: str | None = None, keep: int = 2, options: dict | None = None
    ) -> None:
        self.model_name, self.keep, self.options = model_name, keep, options or {}

    def __call__(self, dialog):
        return [dialog[0], *dialog[1:][-self.keep :]] if len(dialog) > self.keep + 1 else dialog


@pytest.fixture
def keep_last_registered():
    register_context_manager(KeepLast)
    yield
    DEFAULT_MANAGERS.unregister("keep_last")


# ---------------------------------------------------------------- model windows
@pytest.mark.parametrize(
    ("spelling", "window"),
    [
        ("gpt-4o", 128_000),
        ("openai/gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4.1-nano", 1_047_576),
        ("o3-mini", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic/claude-3-5-sonnet-latest", 200_000),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
        ("claude-3-5-sonnet@20240620", 200_000),
        ("models/gemini-2.5-pro", 1_048_576),
        ("gemini-1.5-pro-002", 2_097_152),
        ("GPT-4-32K-0613", 32_768),
        ("gpt-4-0613", 8_192),
    ],
)
def test_the_shipped_table_knows_current_models_by_their_usual_spellings(spelling, window):
    assert context_window(spelling) == window
    manager = DefaultContextManager(spelling)
    assert (
        manager.max_tokens == window and manager.budget == window - SAFETY_BUFFER == window - 5_000
    )


def test_unknown_models_need_max_tokens_or_an_override():
    with pytest.raises(ValidationError, match=r"model_name 'acme-llm-7b'.*max_tokens"):
        DefaultContextManager("acme-llm-7b")
    assert DefaultContextManager("acme-llm-7b", max_tokens=32_000).budget == 27_000
    assert DefaultContextManager("gpt-4o", context_windows={"gpt-4o": 9_000}).max_tokens == 9_000
    register_context_window("acme-llm-7b", 50_000)
    try:
        assert DefaultContextManager("acme-llm-7b-instruct").max_tokens == 50_000
    finally:
        forget_context_window("acme-llm-7b")
    with pytest.raises(ValidationError):
        DefaultContextManager("acme-llm-7b")
    with pytest.raises(ValidationError, match="tokens"):
        register_context_window("x", 0)
    with pytest.raises(ValidationError, match="model_name or max_tokens"):
        DefaultContextManager()
    with pytest.raises(ValidationError, match="max_tokens"):
        DefaultContextManager("gpt-4o", max_tokens=-1)
    assert all(v > 0 for v in KNOWN_CONTEXT_WINDOWS.values())


def test_the_model_window_decides_what_is_pruned():
    system = SystemMessage(id="s", content=[TextPart(text="you are terse")])
    history = [system] + [text_message(f"m{i}", f"{i:04d} " + "z" * 3_995) for i in range(140)]
    total = sum(estimate_tokens(m) for m in history)
    assert total > 128_000 - 5_000
    assert DefaultContextManager("gpt-4.1")(history) == history  # a 1M window: nothing to do
    pruned = DefaultContextManager("gpt-4o")(history)
    assert pruned[0] is system and pruned[-1] is history[-1]
    assert (
        sum(estimate_tokens(m) for m in pruned)
        <= 123_000
        < sum(estimate_tokens(m) for m in pruned) + 1_010
    )
    assert pruned[1].text().startswith(TRUNCATION_PREFIX)


# ---------------------------------------------------------------- on a stored dialog
async def test_pruning_a_stored_dialog_never_changes_it(acme):
    dialog = await acme.dialogs.create("coder", "You are a careful coder.")
    for i in range(30):
        await acme.dialogs.put_text(dialog.id, f"turn {i:02d} " + "w" * 800)
    stored_before = as_dicts(await acme.tasks.messages(dialog.id))
    messages = await acme.tasks.messages(dialog.id)
    per_turn = estimate_tokens(messages[5])
    budget = estimate_tokens(messages[0]) + 6 * per_turn + per_turn // 3
    manager = DefaultContextManager("gpt-4o", max_tokens=budget + 5_000)
    pruned = manager(messages)
    assert pruned[0].role == "system" and pruned[0].text() == "You are a careful coder."
    assert [m.id for m in pruned[-6:]] == [m.id for m in messages[-6:]]
    border = pruned[1]
    assert border.id == messages[-7].id and border.text().startswith(TRUNCATION_PREFIX)
    assert border.text().endswith("w" * 50) and len(pruned) == 8
    assert sum(estimate_tokens(m) for m in pruned) <= budget
    assert as_dicts(messages) == stored_before  # the list handed in is untouched
    assert as_dicts(await acme.tasks.messages(dialog.id)) == stored_before  # and the store too
    # a ContextWindow in, a new ContextWindow out; the same one back when it already fits
    window = await acme.tasks.context(dialog.id, auto_compress=False)
    trimmed = manager(window)
    assert trimmed is not window and trimmed.trimmed and not window.trimmed
    assert as_dicts(trimmed.messages) == as_dicts(pruned)
    assert trimmed.tokens == sum(estimate_tokens(m) for m in pruned) < window.tokens
    roomy = DefaultContextManager("gpt-4o")
    assert roomy(window) is window
    with pytest.raises(ValidationError, match="dialog"):
        roomy("not a dialog")


SIZES = st.lists(st.integers(0, 600), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(SIZES, st.integers(1, 3_000))
def test_default_manager_keeps_the_first_and_a_contiguous_tail_within_budget(sizes, budget):
    history = [text_message(f"m{i}", "q" * size) for i, size in enumerate(sizes)]
    before = as_dicts(history)
    pruned = DefaultContextManager(max_tokens=budget, safety_buffer=0)(history)
    assert as_dicts(history) == before
    assert pruned[0] is history[0]
    rest = pruned[1:]
    if rest:
        tail_ids = [m.id for m in rest]
        assert tail_ids == [m.id for m in history[len(history) - len(rest) :]]  # contiguous tail
        for message in rest[1:]:
            assert (
                message is history[[m.id for m in history].index(message.id)]
            )  # only the border changes
    fits = sum(estimate_tokens(m) for m in history) <= budget
    if fits:
        assert pruned == history
    elif estimate_tokens(history[0]) <= budget:
        assert sum(estimate_tokens(m) for m in pruned) <= budget
        if rest and rest[0] is not history[len(history) - len(rest)]:
            assert rest[0].text().startswith(TRUNCATION_PREFIX)


# ---------------------------------------------------------------- registry and configuration
def test_register_context_manager_is_keyed_by_name_and_refuses_a_class_without_one():
    registry = ContextManagerRegistry()
    assert registry.register(KeepLast) is KeepLast and registry.names() == ["keep_last"]

    class Nameless(ContextManager):
        def __call__(self, dialog):
            return dialog

    with pytest.raises(ValueError, match="name"):
        registry.register(Nameless)
    with pytest.raises(ValidationError, match="ContextManager"):
        registry.register(dict)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"unknown context manager type 'summary'.*keep_last"):
        registry.build({"type": "summary"})
    assert isinstance(ValidationError("x"), (ValueError, MindstoreError))
    assert set(DEFAULT_MANAGERS.names()) >= {"default", "message_count"}
    with pytest.raises(TypeError):
        ContextManager()  # type: ignore[abstract]


def test_the_documents_yaml_builds_each_agents_manager():
    config = ContextConfig.from_yaml(SEED_YAML)
    cheap = config.context_manager_for("cheap_agent")
    assert isinstance(cheap, DefaultContextManager)
    assert (cheap.model_name, cheap.max_tokens, cheap.budget) == ("gpt-4o-mini", 16_000, 11_000)
    assert config.context_manager_for("no_prune_agent") is None
    other = config.context_manager_for("someone_else")  # the global block alone
    assert isinstance(other, DefaultContextManager) and other.max_tokens == 128_000
    assert config.agent_names() == ["cheap_agent", "no_prune_agent"]


def test_overrides_deep_merge_and_auto_detect_the_window(keep_last_registered):
    config = ContextConfig.from_dict({
        "global": {"model_name": "claude-sonnet-4-5", "context_manager": {"type": "default"}},
        "agent_configs": [
            {"name": "planner"},  # inherits: the default manager on the global model
            {"name": "coder", "model_name": "gpt-4o"},
            {"name": "summarizer",
             "context_manager": {"type": "keep_last", "keep": 3, "options": {"a": 1, "b": 2}}},
            {"name": "quiet", "context_manager": None},
            {"name": "counted", "context_manager": {"type": "message_count", "max_messages": 2}},
        ],
    })  # fmt: skip
    assert config.context_manager_for("planner").max_tokens == 200_000
    assert config.context_manager_for("coder").max_tokens == 128_000  # auto-detected
    summarizer = config.context_manager_for("summarizer")
    assert (
        isinstance(summarizer, KeepLast)
        and summarizer.keep == 3
        and summarizer.model_name == "claude-sonnet-4-5"
    )
    assert config.context_manager_for("quiet") is None
    counted = config.context_manager_for("counted")
    assert isinstance(counted, MessageContextManager) and counted.max_messages == 2
    nested = ContextConfig.from_dict(
        {
            "global": {"context_manager": {"type": "keep_last", "options": {"a": 1, "b": 2}}},
            "agent_configs": [{"name": "x", "context_manager": {"options": {"b": 3}}}],
        }
    )
    assert nested.settings_for("x") == {"type": "keep_last", "options": {"a": 1, "b": 3}}
    assert nested.context_manager_for("x").options == {"a": 1, "b": 3}
    assert ContextConfig.from_dict({}).context_manager_for("anyone") is None  # no block: no pruning
    # another type than the global one: the global options (another class's) do not carry over
    switched = ContextConfig.from_dict({
        "global": {"context_manager": {"type": "default", "max_tokens": 1_000}},
        "agent_configs": [
            {"name": "r", "context_manager": {"type": "keep_last", "keep": 3}},
            {"name": "same", "context_manager": {"type": "default", "safety_buffer": 0}},
        ],
    })  # fmt: skip
    assert switched.settings_for("r") == {"type": "keep_last", "keep": 3}
    assert switched.context_manager_for("r").keep == 3
    assert switched.settings_for("same") == {
        "type": "default",
        "max_tokens": 1_000,
        "safety_buffer": 0,
    }


def test_bad_configurations_are_typed_errors(tmp_path):
    with pytest.raises(ValidationError, match="type is required"):
        ContextConfig.from_dict(
            {"global": {"context_manager": {"max_tokens": 10}}}
        ).context_manager_for("a")
    with pytest.raises(ValidationError, match="more than once"):
        ContextConfig.from_dict({"agent_configs": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ValidationError, match="agent_configs"):
        ContextConfig.from_dict({"agent_configs": {"name": "a"}})
    with pytest.raises(ValidationError, match="mapping"):
        ContextConfig.from_yaml("- just\n- a list\n")
    with pytest.raises(ValidationError, match="YAML"):
        ContextConfig.from_yaml("global: [unclosed")
    with pytest.raises(ValidationError, match=r"'default'.*unexpected keyword argument 'windowz'"):
        ContextConfig.from_dict(
            {"global": {"context_manager": {"type": "default", "windowz": 3}}}
        ).context_manager_for("a")
    with pytest.raises(ValidationError, match="model_name 'mystery'"):
        ContextConfig.from_dict(
            {"global": {"model_name": "mystery", "context_manager": {"type": "default"}}}
        ).context_manager_for("a")
    with pytest.raises(ConfigurationError):
        ContextConfig.from_file(tmp_path / "missing.yaml")
    path = tmp_path / "agents.yaml"
    path.write_text(SEED_YAML)
    assert ContextConfig.from_file(path).context_manager_for("cheap_agent").max_tokens == 16_000


JSONISH = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    lambda children: st.dictionaries(st.sampled_from("abc"), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcd"), JSONISH),
    st.dictionaries(st.sampled_from("abcd"), JSONISH),
)
def test_deep_merge_lets_the_override_win_everywhere_it_speaks(base, override):
    merged = deep_merge(base, override)
    assert set(merged) == set(base) | set(override)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            assert merged[key] == deep_merge(base[key], value)
        else:
            assert merged[key] == value
    for key in set(base) - set(override):
        assert merged[key] == base[key]
    assert deep_merge(merged, override) == merged  # idempotent
