"""Synthetic agent sessions for the demo, the tests and the benchmarks: seeded and deterministic.

Three scenarios, each a conversation with several user turns:

* ``travel``  — a travel agent fanning out parallel batches (up to 12 calls) of searches, then
  booking (side-effecting) and referring back to earlier confirmation codes;
* ``coding``  — a coding agent in a long sequential tool loop (read, grep, run tests, edit,
  commit, deploy) with long, streamed tool output (test logs, file contents);
* ``support`` — a support agent looking up customers and orders in parallel, refunding and
  e-mailing (side-effecting), then answering questions about what it found earlier.

Each session is written as a provider request body (the whole conversation, as the last request
of a live run would carry it), one per line of a JSONL file, with three session keys beside the
body: ``id`` (the session name), ``side_effect_tools`` and ``streamed_calls`` (call ids whose
results arrived as a stream; replay streams them).

Run by path (``data`` is not an installed package)::

    python data/generate.py                       # rewrite the shipped data/sessions/*.jsonl
    python data/generate.py --scenario coding --provider openai --count 5 --seed 3 --out /tmp/x.jsonl

or from Python: ``from data.generate import generate, write_jsonl`` (with the repo root on the path).
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANTHROPIC, OPENAI = "anthropic", "openai"
SCENARIOS = ("travel", "coding", "support")
HERE = Path(__file__).resolve().parent
SHIPPED = (  # file name, scenario, provider, count, seed
    ("anthropic-parallel.jsonl", "travel", ANTHROPIC, 8, 11),
    ("openai-loops.jsonl", "coding", OPENAI, 6, 23),
    ("anthropic-support.jsonl", "support", ANTHROPIC, 5, 37),
    ("openai-support.jsonl", "support", OPENAI, 3, 41),
)


# ------------------------------------------------------------------------------ neutral transcript
@dataclass
class Call:
    id: str
    name: str
    args: dict[str, Any]


@dataclass
class Transcript:
    """A provider-neutral conversation the renderers turn into request bodies."""

    system: str
    tools: list[tuple[str, str, dict[str, str]]]  # name, description, {param: type}
    turns: list[tuple[str, Any]] = field(default_factory=list)  # ("user", text) | ("assistant", (text, [Call])) | ("results", [(id, text)])
    side_effect_tools: list[str] = field(default_factory=list)
    streamed_calls: list[str] = field(default_factory=list)

    def user(self, text: str) -> None:
        self.turns.append(("user", text))

    def assistant(self, text: str | None, calls: list[Call] | None = None) -> None:
        self.turns.append(("assistant", (text, list(calls or []))))

    def results(self, pairs: list[tuple[str, str]]) -> None:
        self.turns.append(("results", pairs))


class Ids:
    """Deterministic identifiers in the shapes providers and businesses use."""

    def __init__(self, rng: random.Random, provider: str) -> None:
        self.rng = rng
        self.provider = provider

    def call(self) -> str:
        alphabet = string.ascii_letters + string.digits
        body = "".join(self.rng.choice(alphabet) for _ in range(24))
        return ("toolu_01" if self.provider == ANTHROPIC else "call_") + body

    def code(self, prefix: str, n: int = 6, alphabet: str = string.ascii_uppercase + string.digits) -> str:
        return prefix + "".join(self.rng.choice(alphabet) for _ in range(n))

    def sha(self) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(12))


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------------------------- scenarios
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Rome", "Florence", "Vienna", "Prague", "Berlin", "Copenhagen",
          "Oslo", "Dublin", "Edinburgh", "Athens", "Krakow", "Budapest"]
AIRPORTS = {"Lisbon": "LIS", "Porto": "OPO", "Madrid": "MAD", "Seville": "SVQ", "Rome": "FCO", "Florence": "FLR",
            "Vienna": "VIE", "Prague": "PRG", "Berlin": "BER", "Copenhagen": "CPH", "Oslo": "OSL", "Dublin": "DUB",
            "Edinburgh": "EDI", "Athens": "ATH", "Krakow": "KRK", "Budapest": "BUD"}
AIRLINES = ["TP", "IB", "LH", "AZ", "OS", "SK", "EI", "A3", "LO", "FR"]
HOTEL_WORDS = ["Grand", "Riverside", "Old Town", "Harbour", "Garden", "Royal", "Central", "Artisan", "Cloister",
               "Lighthouse"]
NAMES = ["Amelia Ahmed", "Noah Kowalski", "Sofia Rossi", "Liam Murphy", "Mia Li", "Lucas Silva", "Emma Novak",
         "Oliver Hansen", "Isla Costa", "Mateo Garcia", "Chloe Dubois", "Ethan Berg"]


def travel(rng: random.Random, provider: str) -> Transcript:
    """Parallel fan-out, bookings (side effects), later turns referring back to codes."""
    ids = Ids(rng, provider)
    origin, dest, second = rng.sample(CITIES, 3)
    people = rng.randint(1, 4)
    traveller = rng.choice(NAMES)
    t = Transcript(
        system=("You are a travel agent. Use the tools to search and book. Confirm prices before booking; "
                "quote confirmation codes back to the traveller. Make independent calls in parallel."),
        tools=[("search_flights", "Search flights on a date", {"origin": "string", "destination": "string", "date": "string"}),
               ("search_hotels", "Search hotels in a city", {"city": "string", "nights": "integer"}),
               ("get_weather", "Forecast for a city", {"city": "string", "date": "string"}),
               ("get_exchange_rate", "Exchange rate", {"base": "string", "quote": "string"}),
               ("search_restaurants", "Restaurants near a place", {"city": "string", "cuisine": "string"}),
               ("get_opening_hours", "Opening hours of a venue", {"venue_id": "string"}),
               ("book_flight", "Book a flight offer", {"offer_id": "string", "passengers": "integer"}),
               ("book_hotel", "Book a hotel offer", {"offer_id": "string", "nights": "integer"}),
               ("purchase_insurance", "Buy travel insurance", {"booking_ref": "string", "plan": "string"}),
               ("send_itinerary", "E-mail the itinerary", {"email": "string", "booking_refs": "array"})],
        side_effect_tools=["book_flight", "book_hotel", "purchase_insurance", "send_itinerary"],
    )
    day = rng.randint(3, 25)
    date = f"2025-06-{day:02d}"
    back = f"2025-06-{day + rng.randint(3, 5):02d}"
    t.user(f"Hi, I'm {traveller}. Plan a trip from {origin} to {dest} for {people} people, leaving {date} and "
           f"returning {back}. We'd also like two nights in {second}. Keep it under 2500 EUR if you can.")
    # batch 1: flights on a few dates + weather + hotels + fx
    calls, results = [], []
    offers: list[dict[str, Any]] = []
    for d in (date, f"2025-06-{day + 1:02d}", back):
        c = Call(ids.call(), "search_flights", {"origin": AIRPORTS[origin], "destination": AIRPORTS[dest], "date": d})
        flights = []
        for _ in range(rng.randint(3, 6)):
            offer = {"offer_id": ids.code("OF-"), "flight": f"{rng.choice(AIRLINES)}{rng.randint(100, 9999)}",
                     "departs": f"{d}T{rng.randint(6, 21):02d}:{rng.choice(['05', '20', '35', '50'])}",
                     "price_eur": rng.randint(60, 420), "seats_left": rng.randint(1, 9),
                     "fare": rng.choice(["basic", "standard", "flex"])}
            flights.append(offer)
        offers.extend(flights)
        calls.append(c)
        results.append((c.id, _j({"flights": flights})))
    hotels = []
    for city in (dest, second):
        c = Call(ids.call(), "search_hotels", {"city": city, "nights": 2 if city == second else rng.randint(3, 5)})
        found = [{"offer_id": ids.code("HT-"), "name": f"{rng.choice(HOTEL_WORDS)} {city} Hotel",
                  "stars": rng.randint(3, 5), "price_per_night_eur": rng.randint(70, 260),
                  "rating": round(rng.uniform(7.1, 9.6), 1), "free_cancellation": rng.random() < 0.6}
                 for _ in range(rng.randint(3, 5))]
        hotels.append((city, found))
        calls.append(c)
        results.append((c.id, _j({"hotels": found})))
    for city in (dest, second):
        c = Call(ids.call(), "get_weather", {"city": city, "date": date})
        calls.append(c)
        results.append((c.id, _j({"city": city, "date": date, "high_c": rng.randint(19, 33), "low_c": rng.randint(11, 19),
                                   "rain_chance": rng.randint(0, 60)})))
    c = Call(ids.call(), "get_exchange_rate", {"base": "EUR", "quote": "USD"})
    calls.append(c)
    results.append((c.id, _j({"base": "EUR", "quote": "USD", "rate": round(rng.uniform(1.03, 1.15), 4)})))
    t.assistant("Let me check flights, hotels and the weather for both cities at once.", calls)
    t.results(results)
    best = sorted(offers, key=lambda o: o["price_eur"])[:3]
    hotel_pick = min(hotels[0][1], key=lambda h: h["price_per_night_eur"])
    t.assistant(
        "Here are the best options:\n"
        + "\n".join(f"- {o['flight']} ({o['offer_id']}) on {o['departs']}: {o['price_eur']} EUR, {o['fare']} fare" for o in best)
        + f"\nHotel in {dest}: {hotel_pick['name']} ({hotel_pick['offer_id']}), {hotel_pick['price_per_night_eur']} EUR/night."
        + "\nShall I book these?"
    )
    # turn 2: bookings (side effects) in parallel
    pick = best[0]
    t.user(f"Yes, book {pick['flight']} and the {hotel_pick['name']}. Email the itinerary to "
           f"{traveller.split()[0].lower()}@example.com.")
    pnr, hbook = ids.code("PNR-", 6), ids.code("HB-", 7, string.digits)
    c1 = Call(ids.call(), "book_flight", {"offer_id": pick["offer_id"], "passengers": people})
    c2 = Call(ids.call(), "book_hotel", {"offer_id": hotel_pick["offer_id"], "nights": 3})
    t.assistant("Booking the flight and the hotel now.", [c1, c2])
    t.results([(c1.id, _j({"status": "confirmed", "booking_ref": pnr, "total_eur": pick["price_eur"] * people})),
               (c2.id, _j({"status": "confirmed", "booking_ref": hbook, "total_eur": hotel_pick["price_per_night_eur"] * 3}))])
    c3 = Call(ids.call(), "send_itinerary", {"email": f"{traveller.split()[0].lower()}@example.com", "booking_refs": [pnr, hbook]})
    t.assistant(None, [c3])
    t.results([(c3.id, _j({"sent": True, "message_id": ids.code("MSG-", 10)}))])
    t.assistant(f"Booked: flight {pick['flight']} (ref {pnr}) and {hotel_pick['name']} (ref {hbook}). "
                "The itinerary is in your inbox.")
    # turn 3: a wide batch (up to 12 calls) of restaurants and venues
    t.user(f"Great. Find us restaurants in {dest} and {second} (seafood and local food), and check the opening "
           "hours of a few museums there.")
    calls, results = [], []
    venues = []
    for city in (dest, second):
        for cuisine in ("seafood", "local"):
            c = Call(ids.call(), "search_restaurants", {"city": city, "cuisine": cuisine})
            found = [{"venue_id": ids.code("RS-", 5), "name": f"{rng.choice(['Casa', 'Taberna', 'Bistro', 'Osteria'])} "
                      f"{rng.choice(['Azul', 'do Mar', 'Verde', 'Antiga', 'Nova'])}", "rating": round(rng.uniform(3.8, 4.9), 1),
                      "price": rng.choice(["€", "€€", "€€€"])} for _ in range(rng.randint(3, 5))]
            venues.extend(found)
            calls.append(c)
            results.append((c.id, _j({"city": city, "cuisine": cuisine, "results": found})))
    museums = [ids.code("MU-", 4) for _ in range(rng.randint(5, 9))]
    for m in museums:
        c = Call(ids.call(), "get_opening_hours", {"venue_id": m})
        calls.append(c)
        results.append((c.id, _j({"venue_id": m, "open": f"{rng.randint(8, 10)}:00", "close": f"{rng.randint(17, 20)}:00",
                                   "closed_on": rng.choice(["Monday", "Tuesday", "none"])})))
    calls = calls[:12]
    results = results[:12]
    t.assistant("Searching restaurants and museum hours in parallel.", calls)
    t.results(results)
    top = sorted(venues, key=lambda v: -v["rating"])[:3]
    t.assistant("Top picks: " + ", ".join(f"{v['name']} ({v['venue_id']}, {v['rating']})" for v in top) + ".")
    # turn 4: insurance against an earlier booking reference, then a question about turn 1
    t.user("Add travel insurance to the flight booking, then remind me what the flight costs and our hotel code.")
    c = Call(ids.call(), "purchase_insurance", {"booking_ref": pnr, "plan": rng.choice(["basic", "plus"])})
    t.assistant(None, [c])
    t.results([(c.id, _j({"status": "active", "policy_no": ids.code("INS-", 8, string.digits), "booking_ref": pnr}))])
    t.assistant(f"Insurance added to {pnr}. Your flight {pick['flight']} costs {pick['price_eur']} EUR per person "
                f"and the hotel booking code is {hbook}.")
    t.user("Thanks, that's all.")
    return t


MODULES = ["billing", "invoices", "auth", "scheduler", "reports", "exporter", "cache", "webhooks"]


def coding(rng: random.Random, provider: str) -> Transcript:
    """A long sequential loop with streamed test logs and file reads, edits, a commit and a deploy."""
    ids = Ids(rng, provider)
    mod = rng.choice(MODULES)
    t = Transcript(
        system=("You are a coding agent working in a Python repository. Use one tool at a time unless the calls "
                "are independent. Run the tests after every change."),
        tools=[("list_files", "List files", {"path": "string"}), ("read_file", "Read a file", {"path": "string"}),
               ("grep", "Search the repository", {"pattern": "string"}),
               ("run_tests", "Run pytest on a path", {"path": "string"}),
               ("write_file", "Overwrite a file", {"path": "string", "content": "string"}),
               ("git_commit", "Commit staged changes", {"message": "string"}),
               ("deploy", "Deploy a commit to an environment", {"env": "string", "sha": "string"}),
               ("get_deploy_status", "Status of a deployment", {"deploy_id": "string"})],
        side_effect_tools=["write_file", "git_commit", "deploy"],
    )
    failing = f"test_{mod}_{rng.choice(['rounding', 'timezone', 'retry', 'pagination', 'encoding'])}"
    t.user(f"The CI run is red: {failing} fails in tests/test_{mod}.py. Find the bug and fix it.")

    def call(name: str, args: dict[str, Any], out: str, *, text: str | None = None, streamed: bool = False) -> str:
        c = Call(ids.call(), name, args)
        t.assistant(text, [c])
        t.results([(c.id, out)])
        if streamed:
            t.streamed_calls.append(c.id)
        return c.id

    def test_log(passed: int, failed: list[str]) -> str:
        lines = ["============ test session starts ============", f"collected {passed + len(failed)} items", ""]
        for k in range(passed):
            lines.append(f"tests/test_{mod}.py::test_case_{k:03d} PASSED [{(k + 1) * 100 // (passed + len(failed)):3d}%]")
        for f in failed:
            lines.append(f"tests/test_{mod}.py::{f} FAILED")
        for f in failed:
            lines += ["", f"_____ {f} _____", f"    def {f}():", f"        result = {mod}.compute(Decimal('{rng.randint(10, 99)}.{rng.randint(0, 99):02d}'))",
                      f">       assert result == Decimal('{rng.randint(10, 99)}.{rng.randint(0, 99):02d}')",
                      "E       AssertionError: values differ", f"src/{mod}/core.py:{rng.randint(40, 300)}: AssertionError"]
        lines.append(f"===== {len(failed)} failed, {passed} passed in {rng.uniform(0.5, 9):.2f}s =====")
        return "\n".join(lines)

    def source(path: str, n: int) -> str:
        body = [f'"""{mod}: {path}."""', "from decimal import Decimal, ROUND_HALF_UP", ""]
        for k in range(n):
            fn = rng.choice(["compute", "normalize", "apply_fee", "parse_row", "to_cents", "split_total"]) + f"_{k}"
            body += [f"def {fn}(value):", f"    # step {k}: {rng.choice(['round', 'convert', 'validate', 'clamp'])}",
                     f"    return Decimal(value).quantize(Decimal('0.0{rng.randint(1, 9)}'), rounding=ROUND_HALF_UP)", ""]
        return "\n".join(body)

    call("list_files", {"path": f"src/{mod}"}, _j([f"src/{mod}/{f}.py" for f in ("__init__", "core", "io", "fees", "models")]),
         text="Let me look at the module first.")
    call("run_tests", {"path": f"tests/test_{mod}.py"}, test_log(rng.randint(25, 60), [failing]), streamed=True)
    line_no = rng.randint(40, 300)
    call("grep", {"pattern": "quantize"}, "\n".join(f"src/{mod}/{f}.py:{rng.randint(10, 400)}: .quantize(Decimal('0.01'))"
                                                   for f in ("core", "fees", "io", "core", "models")))
    # a parallel read of several files
    paths = [f"src/{mod}/{f}.py" for f in rng.sample(["core", "fees", "io", "models"], rng.randint(2, 4))]
    calls = [Call(ids.call(), "read_file", {"path": p}) for p in paths]
    t.assistant("Reading the files that round values.", calls)
    t.results([(c.id, source(c.args["path"], rng.randint(6, 14))) for c in calls])
    t.streamed_calls.extend(c.id for c in calls)
    for step in range(rng.randint(6, 12)):  # the long loop: investigate, edit, test
        kind = rng.choice(["grep", "read_file", "run_tests"])
        if kind == "grep":
            call("grep", {"pattern": rng.choice(["ROUND_", "Decimal(", "def compute", "fee_rate", "tz="])},
                 "\n".join(f"src/{mod}/{rng.choice(['core', 'fees', 'io'])}.py:{rng.randint(1, 400)}: match {k}" for k in range(rng.randint(2, 8))))
        elif kind == "read_file":
            p = f"src/{mod}/{rng.choice(['core', 'fees', 'io', 'models'])}.py"
            call("read_file", {"path": p}, source(p, rng.randint(4, 10)), streamed=True)
        else:
            call("run_tests", {"path": f"tests/test_{mod}.py::{failing}"}, test_log(0, [failing]), streamed=True)
        if step % 6 == 5:
            t.assistant(f"Still investigating: the failure comes from src/{mod}/core.py line {line_no}.")
            t.user("Keep going.")
    patch = f"src/{mod}/core.py"
    call("write_file", {"path": patch, "content": source(patch, 5)}, _j({"written": True, "bytes": rng.randint(900, 4000)}),
         text=f"The bug is at line {line_no}: rounding happens before the fee is applied. Fixing it.")
    call("run_tests", {"path": f"tests/test_{mod}.py"}, test_log(rng.randint(25, 60), []), streamed=True)
    sha = ids.sha()
    call("git_commit", {"message": f"{mod}: apply fee before rounding (fixes {failing})"}, _j({"sha": sha, "files": 1}))
    t.assistant(f"Fixed and committed as {sha}; all tests in tests/test_{mod}.py pass.")
    t.user("Deploy it to staging and tell me when it's healthy.")
    dep = ids.code("dep-", 8, string.ascii_lowercase + string.digits)
    call("deploy", {"env": "staging", "sha": sha}, _j({"deploy_id": dep, "status": "started"}))
    for k in range(rng.randint(2, 5)):
        call("get_deploy_status", {"deploy_id": dep}, _j({"deploy_id": dep, "status": "in_progress", "step": k + 1}))
    call("get_deploy_status", {"deploy_id": dep}, _j({"deploy_id": dep, "status": "healthy", "url": f"https://staging.example.com/{mod}"}))
    t.assistant(f"Deployment {dep} of {sha} is healthy on staging.")
    t.user("Which test was failing originally, and on which line was the bug?")
    t.assistant(f"{failing} was failing; the bug was in {patch} at line {line_no}.")
    return t


def support(rng: random.Random, provider: str) -> Transcript:
    """Parallel order lookups, refunds and e-mails (side effects), questions about earlier results."""
    ids = Ids(rng, provider)
    customer = rng.choice(NAMES)
    cid = ids.code("CUS-", 6, string.digits)
    t = Transcript(
        system="You are a customer-support agent for an online shop. Verify the customer, then help. Refunds need the order id.",
        tools=[("lookup_customer", "Find a customer", {"email": "string"}), ("get_order", "Order details", {"order_id": "string"}),
               ("get_shipment", "Shipment tracking", {"tracking_no": "string"}),
               ("refund_order", "Refund an order", {"order_id": "string", "amount": "number"}),
               ("send_email", "E-mail the customer", {"to": "string", "subject": "string", "body": "string"}),
               ("create_ticket", "Open a ticket for a human", {"summary": "string"})],
        side_effect_tools=["refund_order", "send_email", "create_ticket"],
    )
    email = customer.split()[0].lower() + "@example.com"
    t.user(f"Hello, this is {customer} ({email}). Two of my recent orders arrived damaged and one never arrived.")
    c = Call(ids.call(), "lookup_customer", {"email": email})
    orders = [ids.code("ORD-", 7, string.digits) for _ in range(rng.randint(3, 7))]
    t.assistant("Let me find your account.", [c])
    t.results([(c.id, _j({"customer_id": cid, "name": customer, "orders": orders, "tier": rng.choice(["basic", "plus"])}))])
    calls = [Call(ids.call(), "get_order", {"order_id": o}) for o in orders]
    t.assistant("Checking all your recent orders at once.", calls)
    details = {}
    res = []
    for c in calls:
        o = c.args["order_id"]
        d = {"order_id": o, "total_eur": round(rng.uniform(9, 240), 2), "status": rng.choice(["delivered", "delivered", "in_transit"]),
             "tracking_no": ids.code("TRK", 10, string.digits),
             "items": [{"sku": ids.code("SKU-", 5), "qty": rng.randint(1, 3)} for _ in range(rng.randint(1, 4))]}
        details[o] = d
        res.append((c.id, _j(d)))
    t.results(res)
    damaged = orders[:2]
    missing = orders[2]
    t.assistant(f"I see orders {', '.join(orders)}. Which ones were damaged?")
    t.user(f"{damaged[0]} and {damaged[1]} were damaged. {missing} never arrived.")
    c = Call(ids.call(), "get_shipment", {"tracking_no": details[missing]["tracking_no"]})
    t.assistant(None, [c])
    t.results([(c.id, _j({"tracking_no": details[missing]["tracking_no"], "events": [
        {"at": f"2025-05-{k + 1:02d}", "where": rng.choice(["hub", "depot", "van", "sorting centre"]), "status": s}
        for k, s in enumerate(["received", "in transit", "in transit", "lost"])]}))])
    refunds = [Call(ids.call(), "refund_order", {"order_id": o, "amount": details[o]["total_eur"]}) for o in damaged]
    t.assistant("The parcel was lost in transit. Refunding the two damaged orders now.", refunds)
    refund_ids = {o: ids.code("RF-", 8, string.digits) for o in damaged}
    t.results([(c.id, _j({"refund_id": refund_ids[c.args["order_id"]], "status": "issued"})) for c in refunds])
    tk = Call(ids.call(), "create_ticket", {"summary": f"Lost parcel {details[missing]['tracking_no']} for {missing}"})
    em = Call(ids.call(), "send_email", {"to": email, "subject": "Your refunds", "body": f"Refunds {', '.join(refund_ids.values())} issued."})
    t.assistant("Opening a ticket for the lost parcel and e-mailing you the refund details.", [tk, em])
    ticket = ids.code("TCK-", 6, string.digits)
    t.results([(tk.id, _j({"ticket": ticket, "queue": "logistics"})), (em.id, _j({"sent": True}))])
    t.assistant(f"Refunds {', '.join(refund_ids.values())} are issued and ticket {ticket} tracks the lost parcel.")
    for _ in range(rng.randint(1, 3)):
        o = rng.choice(orders)
        t.user(f"By the way, what was in order {o} and how much did it cost?")
        t.assistant(f"Order {o} had {len(details[o]['items'])} item(s) ({', '.join(i['sku'] for i in details[o]['items'])}) "
                    f"and cost {details[o]['total_eur']} EUR.")
    t.user(f"And the refund id for {damaged[1]}?")
    t.assistant(f"The refund for {damaged[1]} is {refund_ids[damaged[1]]}.")
    return t


BUILDERS: dict[str, Callable[[random.Random, str], Transcript]] = {"travel": travel, "coding": coding, "support": support}


# ------------------------------------------------------------------------------------- rendering
def render(t: Transcript, provider: str, *, name: str, model: str | None = None) -> dict[str, Any]:
    """The conversation as a request body (plus the session keys ``id``, ``side_effect_tools``, ``streamed_calls``)."""
    if provider == ANTHROPIC:
        body: dict[str, Any] = {"id": name, "model": model or "claude-sonnet-4-5", "max_tokens": 4096, "system": t.system}
        body["tools"] = [{"name": n, "description": d, "input_schema": _schema(p)} for n, d, p in t.tools]
        msgs: list[dict[str, Any]] = []
        for kind, value in t.turns:
            if kind == "user":
                msgs.append({"role": "user", "content": value})
            elif kind == "assistant":
                text, calls = value
                blocks = ([{"type": "text", "text": text}] if text else []) + [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in calls]
                msgs.append({"role": "assistant", "content": blocks if calls else text})
            else:
                msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": out} for i, out in value]})
        body["messages"] = msgs
    else:
        body = {"id": name, "model": model or "gpt-4o"}
        msgs = [{"role": "system", "content": t.system}]
        for kind, value in t.turns:
            if kind == "user":
                msgs.append({"role": "user", "content": value})
            elif kind == "assistant":
                text, calls = value
                m: dict[str, Any] = {"role": "assistant", "content": text}
                if calls:
                    m["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": json.dumps(c.args)}} for c in calls]
                msgs.append(m)
            else:
                msgs.extend({"role": "tool", "tool_call_id": i, "content": out} for i, out in value)
        body["messages"] = msgs
        body["tools"] = [{"type": "function", "function": {"name": n, "description": d, "parameters": _schema(p)}}
                         for n, d, p in t.tools]
    body["side_effect_tools"] = list(t.side_effect_tools)
    body["streamed_calls"] = list(t.streamed_calls)
    return body


def _schema(params: dict[str, str]) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": v} for k, v in params.items()}, "required": list(params)}


def generate(scenario: str, provider: str, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` sessions of one scenario as request bodies; the same arguments give the same bodies."""
    if scenario not in BUILDERS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {', '.join(SCENARIOS)}")
    if provider not in (ANTHROPIC, OPENAI):
        raise ValueError(f"unknown provider {provider!r}; expected anthropic or openai")
    out = []
    for k in range(count):
        rng = random.Random(f"{scenario}/{provider}/{seed}/{k}")
        out.append(render(BUILDERS[scenario](rng, provider), provider, name=f"{scenario}-{provider}-s{seed}-{k:02d}"))
    return out


def write_jsonl(path: str | Path, bodies: list[dict[str, Any]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for body in bodies:
            fh.write(json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path


def write_shipped(out_dir: str | Path = HERE / "sessions") -> list[Path]:
    """(Re)write the shipped set (:data:`SHIPPED`) into ``out_dir``."""
    return [write_jsonl(Path(out_dir) / name, generate(sc, prov, n, seed)) for name, sc, prov, n, seed in SHIPPED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, help="one scenario (default: the whole shipped set)")
    parser.add_argument("--provider", choices=(ANTHROPIC, OPENAI), default=ANTHROPIC)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="output JSONL file (one scenario) or directory (shipped set)")
    args = parser.parse_args(argv)
    if args.scenario is None:
        for path in write_shipped(args.out or HERE / "sessions"):
            print(f"{path} ({path.stat().st_size} bytes)")
        return 0
    if not args.out:
        parser.error("--out is required with --scenario")
    path = write_jsonl(args.out, generate(args.scenario, args.provider, args.count, args.seed))
    print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
