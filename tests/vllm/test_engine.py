"""The engine contract (tests/engines/test_engine_contract.py) against the real vLLM.

The contract's tests are imported and run here with a harness over one VllmEngine on vLLM's
AsyncLLM, built once for the module. Its checks at the engine's side read vLLM itself: the
request's last output from vLLM says finish_reason "abort", vLLM's front end tracks no request
any more, and its scheduler reports no running request (`vllm:num_requests_running`).

The module shares one event loop: vLLM's output handler runs on the loop of the first request
and would be gone with a per-test loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from typing import Any

import pytest

from conversations.engines.base import EngineStream, SamplingParams
from conversations.engines.vllm import VllmEngine
from tests.engines.test_engine_contract import (
    BOUND,
    CHAT,
    TOO_LONG,
    Harness,
    test_a_seed_makes_a_sampled_reply_repeatable,
    test_a_stop_after_the_reply_ended_stops_nothing,
    test_a_stop_sequence_ends_the_reply_before_it,
    test_a_stream_reports_the_prompt_size_counted_where_the_prompt_was_built,
    test_building_and_reading_a_stream_never_blocks_the_loop,
    test_it_accepts_stop_before_the_stream_starts,
    test_it_ends_the_engines_work_when_the_reader_goes_away,
    test_it_keeps_two_concurrent_streams_apart,
    test_it_stops_one_stream_and_the_other_goes_on,
    test_it_stops_the_engines_work_mid_stream,
    test_it_streams_deltas_for_a_chat,
    test_it_turns_an_engine_failure_into_an_error,
)
from tests.vllm import smollm2

__all__ = [
    "test_a_seed_makes_a_sampled_reply_repeatable",
    "test_a_stop_after_the_reply_ended_stops_nothing",
    "test_a_stop_sequence_ends_the_reply_before_it",
    "test_a_stream_reports_the_prompt_size_counted_where_the_prompt_was_built",
    "test_building_and_reading_a_stream_never_blocks_the_loop",
    "test_it_accepts_stop_before_the_stream_starts",
    "test_it_ends_the_engines_work_when_the_reader_goes_away",
    "test_it_keeps_two_concurrent_streams_apart",
    "test_it_stops_one_stream_and_the_other_goes_on",
    "test_it_stops_the_engines_work_mid_stream",
    "test_it_streams_deltas_for_a_chat",
    "test_it_turns_an_engine_failure_into_an_error",
]

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]


class Outputs:
    """vLLM's own outputs per request id, seen on their way to the engine: a tap on the
    AsyncLLM's generate() that hands every output on unchanged and closes vLLM's generator when
    its reader closes it (which is how vLLM learns that a reader went away)."""

    def __init__(self, llm: Any) -> None:
        self.seen: dict[str, list[Any]] = {}  # request id: vLLM's RequestOutputs
        generate = llm.generate

        async def tapped(
            prompt: Any, params: Any, request_id: str, *args: Any, **kwargs: Any
        ) -> AsyncGenerator[Any, None]:
            seen = self.seen[request_id] = []
            async with aclosing(generate(prompt, params, request_id, *args, **kwargs)) as outputs:
                async for output in outputs:
                    seen.append(output)
                    yield output

        llm.generate = tapped

    def finish_reason(self, request_id: str) -> str | None:
        return self.seen[request_id][-1].outputs[0].finish_reason  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def vllm_engine() -> Iterator[tuple[VllmEngine, Outputs]]:
    engine = smollm2.engine()
    engine.load()  # about 20 s on 2 cores; outside any event loop, as on the load thread
    outputs = Outputs(engine.llm())
    yield engine, outputs
    engine.close()


@pytest.fixture
def harness(vllm_engine: tuple[VllmEngine, Outputs]) -> Harness:
    engine, outputs = vllm_engine
    llm = engine.llm()

    def before_stop(stream: EngineStream) -> float:
        return smollm2.running_in_process()

    async def work_ended(stream: Any, running_before: float) -> None:
        assert running_before == 1, "vLLM was running the request when it was stopped"
        if stream.stop_requested:
            assert outputs.finish_reason(stream.request_id) == "abort", "vLLM's own word"
        assert llm.get_num_unfinished_requests() == 0, "vLLM's front end still tracks it"
        # The engine core reports the drop with the step after the abort.
        while smollm2.running_in_process() != 0:  # noqa: ASYNC110 (a gauge, no event)
            await asyncio.sleep(0.02)

    return Harness(
        engine,
        SamplingParams(max_tokens=400, temperature=0.0),
        SamplingParams(max_tokens=12, temperature=0.0),
        before_stop,
        work_ended,
        # Longer than max_model_len: vLLM refuses the prompt.
        lambda: engine.stream(TOO_LONG, SamplingParams(max_tokens=8), request_id="fail"),
    )


async def test_it_sends_vllm_the_prompt_through_the_models_chat_template(
    vllm_engine: tuple[VllmEngine, Outputs],
) -> None:
    engine, outputs = vllm_engine
    params = SamplingParams(max_tokens=4, temperature=0.0)
    stream = engine.stream(CHAT, params, request_id="template")
    async with asyncio.timeout(BOUND), aclosing(aiter(stream)) as deltas:
        assert "".join([delta async for delta in deltas])

    prompt = list(outputs.seen["template"][0].prompt_token_ids)
    assert stream.result.prompt_tokens == len(prompt)
    text = (await engine.tokenizer()).decode(prompt)
    assert text.startswith(f"<|im_start|>system\n{CHAT[0].content}<|im_end|>\n<|im_start|>user\n")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n"), "the reply's turn is opened"
    assert stream.result.completion_tokens == sum(
        len(output.outputs[0].token_ids) for output in outputs.seen["template"]
    )
