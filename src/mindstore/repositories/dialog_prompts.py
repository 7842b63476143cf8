"""A dialog's prompts, the pure part: the registry's shape, its checks and the rendering.

`dialogs.put_prompt` renders `registry[prompt]` with the caller's arguments and appends the
text; the message records the prompt's name under `PROMPT_KEY`, which `top_prompt` and the
dialog's dict form (`top_prompt_path`) read back from the tail. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mindstore.errors import NotFound, ValidationError, WrongType
from mindstore.validation import check_text

PROMPT_KEY = "prompt_path"
"""Message metadata key put_prompt writes; the dialog's top prompt is the tail's value."""

PromptRegistry = Mapping[str, "str | Callable[..., str]"]


def check_prompt_call(prompt: str, prompt_args: object, registry: object) -> None:
    """The prompt's name, the registry and the arguments, each checked and named."""
    check_text(prompt, "prompt")
    if not isinstance(registry, Mapping):
        raise WrongType(f"registry must be a mapping, got {type(registry).__name__}")
    if prompt_args is not None and not (
        isinstance(prompt_args, Mapping) and all(isinstance(k, str) for k in prompt_args)
    ):
        raise WrongType("prompt_args must be a dict with string keys")


def render_prompt(
    registry: PromptRegistry, prompt: str, prompt_args: Mapping[str, Any] | None
) -> str:
    """`registry[prompt]` rendered: a `str.format` template or a callable taking the
    arguments as keywords; a template that does not render is a `ValidationError`."""
    if prompt not in registry:
        raise NotFound(f"no prompt {prompt!r} in the registry")
    template = registry[prompt]
    if not (callable(template) or isinstance(template, str)):
        raise WrongType(f"registry[{prompt!r}] must be a template string or a callable")
    try:
        text = (
            template(**(prompt_args or {}))
            if callable(template)
            else template.format(**(prompt_args or {}))
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValidationError(f"prompt {prompt!r} could not be rendered: {exc!r}") from exc
    check_text(text, f"prompt {prompt!r} rendered")
    return text
