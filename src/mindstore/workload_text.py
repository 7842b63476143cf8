"""What the generated conversations say (pure): a few kinds of real agent work.

`mindstore.workload` draws the shape of each conversation (turns, tool calls, sub-tasks,
errors, usage) at random; this module gives it words a reader recognises: a trip being
planned, a support case, a coding session, each with the tool calls such an agent makes.
Each `Script` is one kind of conversation; a conversation keeps its script from its first
turn to its last, and walks its user turns in order, so it reads as one story.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["SCRIPTS", "Script"]


@dataclass(frozen=True)
class Script:
    """The lines of one kind of conversation."""

    title: str
    users: tuple[str, ...]
    """The user's turns, in the order a conversation says them (then again, varied)."""
    replies: tuple[str, ...]
    """The agent's answers, in order, as the users' turns."""
    queries: dict[str, tuple[str, ...]]
    """What the agent asks each tool (by tool name)."""
    results: tuple[str, ...]
    delegations: tuple[str, ...]
    """What a delegated sub-task is asked."""
    reports: tuple[str, ...]
    """What a sub-task reports back when it ends."""

    def user(self, turn: int, rng: random.Random) -> str:
        line = self.users[turn % len(self.users)]
        return line if turn < len(self.users) else f"{line} {rng.choice(FOLLOW_UPS)}"

    def reply(self, turn: int) -> str:
        return self.replies[turn % len(self.replies)]

    def query(self, tool: str, rng: random.Random) -> str:
        return rng.choice(self.queries.get(tool) or self.queries["web_search"])

    def result(self, rng: random.Random) -> list[str]:
        return rng.sample(self.results, k=min(len(self.results), rng.randint(1, 3)))

    def delegation(self, rng: random.Random) -> str:
        return rng.choice(self.delegations)

    def report(self, rng: random.Random) -> str:
        return rng.choice(self.reports)


FOLLOW_UPS = (
    "Can you double-check that?",
    "Thanks, and what about the rest?",
    "One more thing before we wrap up.",
    "Please keep it short.",
)

TRIP = Script(
    title="Lisbon weekend in May",
    users=(
        "I'd like to plan a long weekend in Lisbon, May 15 to 18, for two people.",
        "Our budget is about 1,200 euros without flights. We love museums and seafood.",
        "Can you find a hotel in Alfama or Chiado with a view, under 180 a night?",
        "Book the second one, and add a dinner reservation for Saturday at 8 pm.",
        "What's the weather looking like? Should we pack rain jackets?",
        "Add the tram 28 ride and the Gulbenkian museum to Friday.",
        "Send me the whole itinerary as a summary I can share with my partner.",
    ),
    replies=(
        "Here are three hotels that fit: Memmo Alfama (165 a night, river view), "
        "Lisboa Pessoa (150, in Chiado) and Solar do Castelo (178, inside the castle walls).",
        "Done: the room at Lisboa Pessoa is held for May 15 to 18, free cancellation "
        "until May 10. The dinner at Ramiro is booked for Saturday at 20:00 for two.",
        "The forecast says 22 degrees and mostly sunny, with a chance of showers on "
        "Sunday. A light rain jacket is enough.",
        "Friday: Gulbenkian museum in the morning, lunch in Avenidas Novas, tram 28 "
        "through Graça and Alfama in the afternoon, sunset at Miradouro da Senhora do Monte.",
        "Your itinerary: arrive Thursday evening, museums Friday, Belém and pastéis on "
        "Saturday with dinner at Ramiro, Sintra day trip on Sunday, fly back Monday.",
        "The total so far is 1,080 euros: 450 hotel, 180 dinners, 95 museums and "
        "transport passes, the rest for the Sintra trip.",
    ),
    queries={
        "web_search": (
            "hotels Alfama river view May",
            "best seafood restaurants Lisbon",
            "Sintra day trip from Lisbon train",
        ),
        "fetch_page": ("https://www.visitlisboa.com/en/events", "https://ramiro.pt/reservas"),
        "python": ("sum(hotel + dinners + museums + transport)",),
        "calendar": ("create event: dinner at Ramiro, Sat 20:00", "block May 15-18: Lisbon"),
    },
    results=(
        "Memmo Alfama: 165 EUR/night, 9.1 rating",
        "Lisboa Pessoa: 150 EUR/night, 8.8",
        "Ramiro: table for 2 available Sat 20:00",
        "Forecast Lisbon: 22C sunny, showers Sun",
        "Train Rossio-Sintra every 20 min, 40 min ride",
        "Total: 1,080 EUR",
    ),
    delegations=(
        "Compare three hotels in Alfama and Chiado for May 15-18.",
        "Check museum opening hours for Friday May 16.",
    ),
    reports=(
        "Three hotels compared; Lisboa Pessoa is the best value.",
        "Gulbenkian opens 10:00-18:00 on Friday; tickets 14 EUR.",
    ),
)

SUPPORT = Script(
    title="Order #48213 arrived damaged",
    users=(
        "Hi, my order #48213 arrived yesterday and the blender jar is cracked.",
        "I paid 89.99 for it. I'd like a replacement, not a refund, if possible.",
        "Do I need to send the broken one back? I already threw away the box.",
        "OK. Can you also check why I was charged twice for shipping?",
        "Please send the confirmation to my email on file.",
        "How long will the replacement take to arrive?",
    ),
    replies=(
        "I'm sorry about the cracked jar. I can see order #48213, delivered yesterday, "
        "with the Vortex 600 blender. A replacement is possible: it's in stock.",
        "No need to return it: for damage in transit, a photo is enough. I've created "
        "replacement order #48377 at no cost.",
        "You're right, shipping was charged twice (2 x 4.99). I've refunded 4.99 to your "
        "card; it shows within 3 to 5 business days.",
        "The replacement ships today with express delivery and should arrive Thursday. "
        "The confirmation is on its way to your email.",
        "Per our policy, damage reported within 14 days is replaced free of charge; "
        "your report is well within that.",
    ),
    queries={
        "web_search": ("return policy damaged in transit",),
        "fetch_page": ("https://shop.example/orders/48213", "https://shop.example/policy"),
        "python": ("refund = 2 * 4.99 - 4.99",),
        "calendar": ("follow-up: check delivery of #48377 on Thursday",),
    },
    results=(
        "Order 48213: Vortex 600, delivered 2026-10-12",
        "Shipping charged: 4.99, 4.99",
        "Stock: Vortex 600 jar, 42 units",
        "Replacement 48377 created, express",
        "Policy: transit damage replaced within 14 days",
    ),
    delegations=("Check the payment records of order #48213 for duplicate charges.",),
    reports=("One duplicate shipping charge of 4.99 found and refunded.",),
)

CODING = Script(
    title="Fix the flaky payment test",
    users=(
        "test_checkout_retries fails about one run in ten on CI. Can you find out why?",
        "Here's the traceback: AssertionError: expected 1 charge, got 2.",
        "Run the test 50 times with the fix and tell me how many fail.",
        "Good. Now add a regression test that reproduces the double charge.",
        "Can you also write the commit message?",
        "Please open a pull request against main.",
    ),
    replies=(
        "The retry wrapper re-sends the charge when the first attempt times out, but "
        "the payment provider had already accepted it. The fix is an idempotency key "
        "per checkout, sent with every attempt.",
        "I changed `charge()` to pass `idempotency_key=checkout.id` and made the retry "
        "reuse it. The provider then answers a repeat with the original charge.",
        "50 runs with the fix: 50 passed. Before the fix, 6 of 50 failed.",
        "Added `test_a_timed_out_charge_is_not_sent_twice`, which fails on the old code "
        "and passes now.",
        "Commit message: 'Checkout: one idempotency key per checkout, so a retried "
        "charge after a timeout is not charged twice'.",
    ),
    queries={
        "web_search": ("payment provider idempotency key retries",),
        "fetch_page": ("https://ci.example/runs/9912/log",),
        "python": ("pytest tests/test_checkout.py -k retries --count 50", "git diff --stat"),
        "calendar": ("review slot with Dana, Thursday 14:00",),
    },
    results=(
        "6 failed, 44 passed",
        "50 passed in 12.4s",
        "AssertionError: expected 1 charge, got 2",
        "src/checkout.py | 14 ++++--",
        "Idempotency keys: requests with the same key return the first result",
    ),
    delegations=("Reproduce the flaky failure locally with the timeout forced.",),
    reports=("Reproduced: a forced timeout after the provider accepts gives two charges.",),
)

SCRIPTS: tuple[Script, ...] = (TRIP, SUPPORT, CODING)
