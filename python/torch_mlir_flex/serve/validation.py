"""Requests that `transformers serve` 5.25 would answer with a 500 or that
kill its continuous-batching worker, refused first with a 4xx and a message.

- a chat completion without `messages`, or with messages that are not
  objects with a `role` (transformers reads `body["messages"]` and
  `message["role"]`: KeyError, 500); a response without `input` (likewise);
- a prompt of no tokens (an empty message, an empty completion prompt):
  the batching worker fails to reshape an empty batch and dies, and the
  server stops ("An engine died"). Refused with a 400 (ValueError, which
  serve's app answers with 400).

`guard(handler, check_body)` wraps one handler instance: its
`handle_request`, which the app's routes call, and its
`_check_prompt_length`, which each generating handler calls once the
prompt is tokenized and before it reaches the model's process.
"""

from fastapi import HTTPException
from transformers.cli.serving.utils import prompt_length


def check_chat_body(body: dict) -> None:
    if "messages" not in body:
        raise HTTPException(status_code=422, detail="The request has no `messages`: a chat completion needs "
                                                    "a list of messages, each with a `role` and a `content`.")
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise HTTPException(status_code=422, detail="`messages` must be a list of objects, each with a `role` "
                                                    "and a `content`.")


def check_responses_body(body: dict) -> None:
    if "input" not in body:
        raise HTTPException(status_code=422, detail="The request has no `input`.")


def guard(handler, check_body=None) -> None:
    handle = handler.handle_request
    check_length = handler._check_prompt_length

    async def handle_request(body: dict, request_id: str):
        if check_body is not None:
            check_body(body)
        return await handle(body, request_id)

    def _check_prompt_length(engine, inputs: dict) -> None:
        if prompt_length(inputs) == 0:
            raise ValueError("The prompt is empty (0 tokens): the model needs at least one token to answer.")
        check_length(engine, inputs)

    handler.handle_request = handle_request
    handler._check_prompt_length = _check_prompt_length
