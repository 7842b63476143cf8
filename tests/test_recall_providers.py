"""The embedding providers through their own SDKs, each pointed at a fake local transport
(httpx's `MockTransport`: no network): the request each SDK sends (endpoint, model, texts,
task type, dimensions), the batching of a store's catch-up into the provider's batches,
the vectors' order, and a provider's error reaching the caller as itself."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conftest import StoreFactory
from mindstore import Store
from mindstore.errors import ConfigurationError, ValidationError
from mindstore.search import GeminiEmbedder, OpenAIEmbedder

pytest.importorskip("openai")
pytest.importorskip("google.genai")


def _openai(requests: list[dict[str, Any]], dimensions: int = 4) -> Any:
    from openai import AsyncOpenAI

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append({"url": str(request.url), "body": body})
        data = [
            {"object": "embedding", "index": n, "embedding": [1.0, float(len(text)), 0.0, 0.5]}
            for n, text in enumerate(body["input"])
        ]
        return httpx.Response(
            200,
            json={
                "object": "list",
                "model": body["model"],
                "data": data[::-1],  # the API may answer out of order: `index` says which
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    return AsyncOpenAI(
        api_key="test",
        base_url="http://provider.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        max_retries=0,
    )


def _gemini(requests: list[dict[str, Any]], status: int = 200) -> Any:
    from google import genai
    from google.genai import types

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append({"url": str(request.url), "body": body})
        if status != 200:
            return httpx.Response(status, json={"error": {"code": status, "message": "quota"}})
        values = [
            [1.0, float(len(r["content"]["parts"][0]["text"])), 0.0] for r in body["requests"]
        ]
        return httpx.Response(200, json={"embeddings": [{"values": v} for v in values]})

    return genai.Client(
        api_key="test",
        http_options=types.HttpOptions(
            base_url="http://provider.test/",
            retry_options=types.HttpRetryOptions(attempts=1),
            httpx_async_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        ),
    )


async def test_openai_request_shape_order_and_batches(stores: StoreFactory) -> None:
    requests: list[dict[str, Any]] = []
    embedder = OpenAIEmbedder(_openai(requests), dimensions=4, batch_size=2)
    assert (embedder.model, embedder.dimensions) == ("text-embedding-3-small", 4)
    vectors = await embedder.embed(["a", "bbb"], purpose="document")
    assert [v[1] for v in vectors] == [1.0, 3.0]  # in the texts' order
    assert requests == [
        {
            "url": "http://provider.test/v1/embeddings",
            "body": {
                "model": "text-embedding-3-small",
                "input": ["a", "bbb"],
                "dimensions": 4,
                "encoding_format": "float",
            },
        }
    ]
    with pytest.raises(ValidationError, match="at most 2"):
        await embedder.embed(["a", "b", "c"], purpose="query")
    # a store's catch-up: five messages in batches of two, then the query alone
    requests.clear()
    acme = Store(stores.store.backend, embedder=embedder).scoped("acme")
    task = await acme.tasks.create()
    for n in range(5):
        await acme.tasks.add_human_message(task.id, "x" * (n + 1))
    page = await acme.search("xxx", mode="semantic", limit=5)
    assert len(page.hits) == 5
    assert [len(r["body"]["input"]) for r in requests] == [2, 2, 1, 1]
    assert requests[-1]["body"]["input"] == ["xxx"]
    assert OpenAIEmbedder(_openai([]), model="text-embedding-3-large").dimensions == 3072


async def test_gemini_request_shape_task_types_and_batches(stores: StoreFactory) -> None:
    requests: list[dict[str, Any]] = []
    embedder = GeminiEmbedder(_gemini(requests), dimensions=3, batch_size=2)
    await embedder.embed(["hello"], purpose="query")
    await embedder.embed(["a", "bb"], purpose="document")
    url = "http://provider.test/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert [r["url"] for r in requests] == [url, url]
    first = requests[0]["body"]["requests"]
    assert first == [
        {
            "model": "models/gemini-embedding-001",
            "content": {"parts": [{"text": "hello"}], "role": "user"},
            "taskType": "RETRIEVAL_QUERY",
            "outputDimensionality": 3,
        }
    ]
    assert {r["taskType"] for r in requests[1]["body"]["requests"]} == {"RETRIEVAL_DOCUMENT"}
    requests.clear()
    acme = Store(stores.store.backend, embedder=embedder).scoped("acme")
    task = await acme.tasks.create()
    for n in range(3):
        await acme.tasks.add_human_message(task.id, "y" * (n + 1), message_id=f"m{n}")
    page = await acme.search("yy", mode="semantic", limit=3)
    assert sorted(hit.message_id for hit in page.hits) == ["m0", "m1", "m2"]
    assert [len(r["body"]["requests"]) for r in requests] == [2, 1, 1]


async def test_a_provider_error_reaches_the_caller_and_the_data_is_unchanged(
    stores: StoreFactory,
) -> None:
    from google.genai import errors

    embedder = GeminiEmbedder(_gemini([], status=429), dimensions=3)
    acme = Store(stores.store.backend, embedder=embedder).scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "words", message_id="m")
    with pytest.raises(errors.ClientError):
        await acme.search("words", mode="semantic")
    # a lexical search goes on answering while the provider is down
    assert [h.message_id for h in (await acme.search("words", mode="lexical")).hits] == ["m"]
    # and once it is back, the message is embedded (filled in) at the next search
    embedder.client = _gemini([])
    page = await acme.search("words", mode="semantic")
    assert [hit.message_id for hit in page.hits] == ["m"]


def test_provider_arguments_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        OpenAIEmbedder(_openai([]), batch_size=0)
    with pytest.raises(ConfigurationError, match="batch_size"):
        GeminiEmbedder(_gemini([]), batch_size=500)
