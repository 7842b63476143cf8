"""Conversations that read like real ones, for the console's screenshots (scripts/console_shots.py).

A travel assistant, a support bot and a data analyst: user questions, the assistant's
reasoning, tool calls (web search, a page fetch, Python, a ticket lookup) with their
results beside them, a failed call, answers with model and usage, and a fork that tries
another answer. Written through the API (`tasks.create`, `add_message`,
`answer_tool_call`, `dialogs.fork`), so the store holds exactly what an agent would write.
"""

from __future__ import annotations

from typing import Any

from mindstore.model.messages import AssistantMessage, Usage, UsageCost, UserMessage
from mindstore.model.parts import ReasoningPart, TaskConfigPart, TextPart, ToolCallPart
from mindstore.store import TenantStore

Turn = dict[str, Any]
CONVERSATIONS: list[dict[str, Any]] = [
    {"title": "Long weekend in Lisbon on a 900 EUR budget", "owner": "maria.santos",
     "model": "anthropic/claude-sonnet-4", "turns": [
        {"user": "I have the first weekend of November free. Can you plan three days in "
                 "Lisbon for two people, flights from Berlin included, under 900 EUR?"},
        {"think": "Check flight prices first: they decide the budget. Then a hotel in "
                  "Baixa or Alfama, then a day plan.",
         "say": "Let me look at flights from Berlin for those dates first.",
         "call": ("web_search", {"q": "BER LIS flights 31 Oct - 3 Nov price"}),
         "result": {"results": [
             {"title": "BER-LIS from 138 EUR return (TAP, direct)", "url": "https://example.com/f1"},
             {"title": "easyJet BER-LIS 31 Oct, 96 EUR one way", "url": "https://example.com/f2"}]}},
        {"say": "Direct TAP flights are about 138 EUR return per person, so 276 EUR for "
                "two. I'll check hotels in Alfama next.",
         "call": ("fetch_page", {"url": "https://example.com/alfama-hotels"}),
         "result": {"status": 200, "title": "Alfama guesthouses",
                    "text": "Casa do Largo: 92 EUR/night, breakfast included, 4.7/5 "
                            "(812 reviews)"}},
        {"say": "Here is a plan that fits the budget:\n\n"
                "- Flights: TAP direct, Fri 07:10 to Mon 19:40, 276 EUR for two\n"
                "- Stay: Casa do Largo in Alfama, 3 nights, 276 EUR with breakfast\n"
                "- Fri: Castelo de São Jorge, dinner with fado in Alfama\n"
                "- Sat: tram 28 to Estrela, LX Factory, sunset at Miradouro da Graça\n"
                "- Sun: day trip to Sintra (Pena Palace tickets 20 EUR each)\n\n"
                "Total so far about 650 EUR, which leaves 250 EUR for food and transport."},
        {"user": "Perfect. Can you book the guesthouse?"},
        {"say": "I can't book on your behalf, but here is the direct link with your dates "
                "filled in. Rooms were still free when I checked."},
    ]},
    {"title": "Invoice INV-20931 charged twice", "owner": "support-bot",
     "model": "openai/gpt-4o-mini", "turns": [
        {"user": "Hi, my card was charged twice for invoice INV-20931 this morning."},
        {"think": "Look the invoice up before promising anything.",
         "say": "Sorry about that. Let me check the payments on that invoice.",
         "call": ("billing_lookup", {"invoice": "INV-20931"}),
         "error": "billing API timed out after 10 s"},
        {"say": "The billing system did not answer in time. Trying once more.",
         "call": ("billing_lookup", {"invoice": "INV-20931"}),
         "result": {"invoice": "INV-20931", "payments": [
             {"id": "pay_81Kd", "amount": 49.0, "status": "succeeded"},
             {"id": "pay_81Ke", "amount": 49.0, "status": "succeeded"}]}},
        {"say": "I can see two payments of 49.00 EUR two seconds apart. I've asked for a "
                "refund of the second one (pay_81Ke); it reaches your card in 3 to 5 "
                "working days. You'll get an email confirmation shortly."},
        {"user": "Thanks, that was quick!"},
    ]},
    {"title": "Why did churn go up in Q3?", "owner": "dana.analyst",
     "model": "google/gemini-2.5-pro", "turns": [
        {"user": "Churn went from 2.1% to 3.4% between Q2 and Q3. Can you find out which "
                 "customers drove it? The export is in churn_q3.csv."},
        {"think": "Group cancellations by plan and by signup cohort; compare with Q2.",
         "say": "I'll load the export and compare churn by plan and by signup cohort.",
         "call": ("python", {"code": "df = pd.read_csv('churn_q3.csv')\n"
                                     "df.groupby(['plan', 'quarter']).churned.mean()"}),
         "result": {"stdout": "plan     quarter\nbasic    Q2  0.019\n         Q3  0.041\n"
                              "pro      Q2  0.022\n         Q3  0.024"}},
        {"say": "The increase is almost entirely on the Basic plan (1.9% to 4.1%); Pro is "
                "flat. Checking whether it lines up with the price change of 1 August.",
         "call": ("python", {"code": "basic = df[df.plan == 'basic']\n"
                                     "basic.groupby('signup_month').churned.mean()"}),
         "result": {"stdout": "signup_month\n2026-05  0.018\n2026-06  0.021\n2026-07  0.063"}},
        {"say": "Basic customers who signed up in July churned at 6.3%: they joined at the "
                "old price and were moved to the new one a few weeks later. I'd suggest "
                "grandfathering July signups for one more quarter."},
    ]},
]  # fmt: skip


async def write(view: TenantStore) -> dict[str, str]:
    """Store the conversations in `view`'s tenant; their ids by title, and a fork of the
    first (`fork`) that answers the budget question differently."""
    ids: dict[str, str] = {}
    for conversation in CONVERSATIONS:
        tasks = view.tasks
        record = await tasks.create(
            owner=conversation["owner"],
            title=conversation["title"],
            config=TaskConfigPart(model_name=conversation["model"]),
        )
        ids[conversation["title"]] = record.id
        for number, turn in enumerate(conversation["turns"]):
            if "user" in turn:
                await tasks.add_message(
                    record.id, UserMessage(content=[TextPart(text=turn["user"])])
                )
                continue
            content: list[Any] = []
            if "think" in turn:
                content.append(ReasoningPart(reasoning=turn["think"]))
            content.append(TextPart(text=turn["say"]))
            call_id = f"call_{number}"
            if "call" in turn:
                name, args = turn["call"]
                content.append(ToolCallPart(tool_call_id=call_id, tool_name=name, args=args))
            words = len(turn["say"].split())
            usage = Usage(
                input_tokens=900 + 150 * number,
                output_tokens=40 + 2 * words,
                cost=UsageCost(total=round((900 + 300 * number) * 3e-6, 6)),
            )
            await tasks.add_message(
                record.id,
                AssistantMessage(
                    status="completed", model_id=conversation["model"], content=content, usage=usage
                ),
            )
            if "result" in turn:
                await tasks.answer_tool_call(record.id, call_id, turn["result"])
            elif "error" in turn:
                await tasks.answer_tool_call(
                    record.id,
                    call_id,
                    {"error": turn["error"]},
                    is_error=True,
                    error_message=turn["error"],
                )
    first = ids[CONVERSATIONS[0]["title"]]
    fork = await view.dialogs.fork(first, last_n=0, first_k=1, owner="maria.santos")
    await view.tasks.add_message(
        fork.id,
        AssistantMessage(
            status="completed",
            model_id="openai/gpt-4o",
            content=[
                TextPart(
                    text="Another option: fly easyJet (96 EUR one way each) and stay in "
                    "Baixa; about 120 EUR cheaper, with a 06:00 departure."
                )
            ],
        ),
    )
    ids["fork"] = fork.id
    return ids
