"""The in-process metrics registry and its Prometheus text."""

from __future__ import annotations

import math
from types import SimpleNamespace

from tavern_runtime.metrics import ConsumerLag, Metrics, Summary, jetstream_durables


def test_summary_counts_sums_and_takes_quantiles_over_the_window() -> None:
    summary = Summary(window=100)
    for i in range(1, 201):
        summary.observe(i / 1000)
    assert summary.count == 200
    assert math.isclose(summary.total, sum(i / 1000 for i in range(1, 201)))
    assert summary.quantile(0.5) == 0.151  # the window holds the last 100: 0.101..0.200
    assert summary.quantile(0.99) == 0.2


def test_empty_summary_has_nan_quantiles() -> None:
    assert math.isnan(Summary().quantile(0.5))


def test_render_counts_outcomes_per_handler_and_exports_lag() -> None:
    metrics = Metrics("ledger")
    metrics.observe("Ping", 0.002, "ok")
    metrics.observe("Ping", 0.004, "ok")
    metrics.observe("Ping", 0.010, "error")
    text = metrics.render([ConsumerLag("SESSIONS", "ledger-ingest", 7, 2, 1, 0)])
    lines = text.splitlines()
    assert 'tavern_messages_handled_total{service="ledger",handler="Ping",outcome="ok"} 2' in lines
    assert (
        'tavern_messages_handled_total{service="ledger",handler="Ping",outcome="error"} 1' in lines
    )
    assert 'tavern_handler_seconds_count{service="ledger",handler="Ping"} 3' in lines
    assert (
        'tavern_consumer_pending{service="ledger",stream="SESSIONS",consumer="ledger-ingest"} 7'
        in lines
    )
    assert "# TYPE tavern_handler_seconds summary" in lines
    assert text.endswith("\n")


def test_render_escapes_label_values() -> None:
    metrics = Metrics('we"ird\\name')
    assert 'service="we\\"ird\\\\name"' in metrics.render()


def test_durables_are_found_on_stream_subscribers_only() -> None:
    subscribers = [
        SimpleNamespace(stream=SimpleNamespace(name="SESSIONS"), extra_options={"durable": "proj"}),
        SimpleNamespace(stream=SimpleNamespace(name="INPUTS"), extra_options={}, queue="loop-wake"),
        SimpleNamespace(subject="tavern.rpc.ledger.ping"),  # a core (RPC) subscriber
        SimpleNamespace(stream=SimpleNamespace(name="LEDGER"), extra_options={}, queue=""),
    ]
    assert jetstream_durables(subscribers) == [("INPUTS", "loop-wake"), ("SESSIONS", "proj")]
