"""What a send decided for its reply, and what the engine is asked for from it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from conversations.engines.base import ChatMessage, Engine, SamplingParams
from conversations.engines.specs import ModelSpec, ReplySettings
from conversations.events.protocol import Started
from conversations.services.prompt import Prompt, build_prompt


@dataclass(frozen=True)
class ReplyPlan:
    """What a send decided, committed to the database before anything streams."""

    conversation_id: uuid.UUID
    owner_id: int  # whose tokens the reply uses (see services.budgets)
    group: str
    message_id: int
    request_id: str
    model: ModelSpec
    settings: ReplySettings  # the conversation's system prompt and sampling, within the model's
    started: Started
    history: list[ChatMessage]  # the conversation before this reply, for its prompt
    prefix: str = ""  # a continued reply: the text it goes on from (already shown)
    # What an API call asks of the engine beyond the conversation's settings (the gateway).
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None
    # False: no title request after a first reply (an API call's conversation keeps the first
    # words of its first message, rather than cost the engine a second request per call).
    title_by_model: bool = True
    # A temporary chat: deleted once this reply has ended, if no tab is open on it by then.
    temporary: bool = False

    def prompt(self, engine: Engine) -> Prompt:
        """The messages the engine is given, counted: the history fitted to its context, and for
        a continued reply the text it goes on writing. Counting tokens blocks (a tokenizer, or
        the model's server): call this off the event loop."""
        return build_prompt(
            history=self.history, engine=engine, reply=self.settings, prefix=self.prefix
        )

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.settings.max_tokens,
            temperature=self.settings.temperature,
            continue_final=bool(self.prefix),
            top_p=self.top_p,
            stop=self.stop,
            seed=self.seed,
            tools=self.tools,
            tool_choice=self.tool_choice,
        )
