"""A model whose template thinks, through the real engine: its reply is saved with its reasoning and
timed, and the next turn's prompt (the tokens the engine is sent) leaves that reasoning out; the chat's
thinking switch reaches the template."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.conversation.prompt import PromptBuild, to_messages
from app.conversation.reasoning import OPEN_MARKER, split_reply
from app.conversation.reply import OK, write_reply
from app.devices import probe_devices
from app.engine import GenerationParams
from app.session import ModelSession
from app.store import Store
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.fit import evaluate
from planner.gguf import read_gguf
from tests.support.thinking import RECORDED, write_thinking_model

pytestmark = pytest.mark.llama

GREEDY = GenerationParams(max_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):
    path = write_thinking_model(tmp_path_factory.mktemp("thinking") / "tiny-thinking-instruct.gguf")
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    fit = evaluate(anatomy, LoadConfig(n_ctx=2048), [], devices.host)
    session = ModelSession()
    session.load(str(path), anatomy, fit, devices)
    yield session
    session.close()


def _reply(session: ModelSession, store: Store, conv_id: int, thinking: bool = True):
    sent: list[PromptBuild] = []
    msg_id = store.begin_reply(conv_id)
    outcome = write_reply(
        session,
        store,
        msg_id,
        to_messages(store.conversation(conv_id).messages),
        "",
        GREEDY,
        threading.Event(),
        on_fitted=sent.append,
        on_piece=lambda p: None,
        thinking=thinking,
    )
    assert outcome.kind == OK, outcome.error
    return outcome, sent[0]


def test_the_reasoning_of_a_reply_stays_out_of_the_next_prompt(session: ModelSession, tmp_path: Path) -> None:
    store = Store(tmp_path / "chats.db")
    conv = store.new_conversation("tiny", "tiny")
    store.add_message(conv.id, "user", "What is 7 times 8?")
    first, first_prompt = _reply(session, store, conv.id)
    assert first_prompt.text.endswith("<|im_start|>assistant\n<think>\n")  # the template opened the block
    saved = store.conversation(conv.id).messages[-1].content
    assert saved == first.text and saved.startswith(OPEN_MARKER)  # stored with its marker
    reasoning = split_reply(saved).reasoning
    assert len(reasoning) > 10  # the model wrote (random words, all of them thoughts: it never closed the block)
    assert first.thought is not None and first.thought.tokens == first.stats.generated_tokens == 12
    assert first.thought.seconds > 0

    store.add_message(conv.id, "user", "And 9 times 9?")
    _, second_prompt = _reply(session, store, conv.id)
    assert reasoning not in second_prompt.text
    assert "What is 7 times 8?<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n" in second_prompt.text
    assert second_prompt.tokens == session.engine.tokenize(second_prompt.text)  # what the engine was sent

    # a reply with an answer after its thoughts (recorded from a DeepSeek-R1 distill): the answer goes on
    recorded, thoughts, answer = RECORDED[2][1], RECORDED[2][2], RECORDED[2][3]
    conv = store.new_conversation("tiny", "tiny")
    store.add_message(conv.id, "user", "What is 7 times 8?")
    store.finish_reply(store.begin_reply(conv.id), recorded, "eos", 80, 20.0)
    store.add_message(conv.id, "user", "And 9 times 9?")
    _, third_prompt = _reply(session, store, conv.id)
    assert f"<|im_start|>assistant\n{answer}<|im_end|>" in third_prompt.text
    assert thoughts.splitlines()[0] not in third_prompt.text and "<think>\nAlright" not in third_prompt.text


def test_thinking_off_for_a_chat_reaches_the_template(session: ModelSession, tmp_path: Path) -> None:
    store = Store(tmp_path / "chats.db")
    conv = store.new_conversation("tiny", "tiny")
    store.add_message(conv.id, "user", "What is 7 times 8?")
    outcome, prompt = _reply(session, store, conv.id, thinking=False)
    assert prompt.text.endswith("<think>\n\n</think>\n\n")  # enable_thinking false: the template closed it
    assert outcome.thought is None and not outcome.text.startswith("<think>")
