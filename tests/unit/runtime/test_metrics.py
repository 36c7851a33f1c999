"""The in-process metrics registry and its Prometheus text (read back with the library's
parser: sample values and label order are the library's to format)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

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


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(name, labels) -> value, read back with `prometheus_client`'s own parser."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_render_counts_outcomes_per_handler_and_exports_lag() -> None:
    metrics = Metrics("ledger")
    metrics.observe("Ping", 0.002, "ok")
    metrics.observe("Ping", 0.004, "ok")
    metrics.observe("Ping", 0.010, "error")
    text = metrics.render([ConsumerLag("SESSIONS", "ledger-ingest", 7, 2, 1, 0)])
    samples = _samples(text)
    ping = {("service", "ledger"), ("handler", "Ping")}
    handled = "tavern_messages_handled_total"
    assert samples[(handled, frozenset({*ping, ("outcome", "ok")}))] == 2
    assert samples[(handled, frozenset({*ping, ("outcome", "error")}))] == 1
    assert samples[("tavern_handler_seconds_count", frozenset(ping))] == 3
    assert math.isclose(samples[("tavern_handler_seconds_sum", frozenset(ping))], 0.016)
    lag = {("service", "ledger"), ("stream", "SESSIONS"), ("consumer", "ledger-ingest")}
    assert samples[("tavern_consumer_pending", frozenset(lag))] == 7
    assert "# TYPE tavern_handler_seconds summary" in text.splitlines()
    assert "# TYPE tavern_messages_handled_total counter" in text.splitlines()
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
