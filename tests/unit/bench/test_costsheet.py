"""The cost sheet's arithmetic: counters before and after a load, divided by its turns."""

from __future__ import annotations

import pytest

from bench.costsheet import (
    Counters,
    LagPoint,
    by_client,
    machine_shares,
    machine_times,
    per_turn,
    sheet,
    thin,
)


def _counters(at: float, scale: int, statements: bool = True) -> Counters:
    return Counters(
        at=at,
        cpu_s={"loop": 1.0 * scale, "postgres": 0.5 * scale},
        streams={"SESSIONS": (120 * scale, 60_000 * scale), "INPUTS": (10 * scale, 4_000 * scale)},
        bus={"in_msgs": 300 * scale, "out_msgs": 500 * scale},
        clients={"loop": {"in_msgs": 50 * scale, "out_msgs": 70 * scale}},
        database={"xact_commit": 40 * scale, "wal_sync": 20 * scale, "wal_bytes": 80_000 * scale},
        statements=(
            {
                "ledger: INSERT INTO a": 60 * scale,
                "ledger: SELECT b": 30 * scale,
                "projector: SELECT c": 30 * scale,
            }
            if statements
            else None
        ),
        machine={
            "user": 100 * scale,
            "system": 20 * scale,
            "idle": 60 * scale,
            "steal": 20 * scale,
        },
    )


def test_sheet_divides_the_difference_of_the_counters_by_the_turns() -> None:
    result = sheet(_counters(10.0, 1), _counters(25.0, 3), turns=10)

    assert result.seconds == 15.0
    assert result.cpu_ms == {"loop": 200.0, "postgres": 100.0}
    assert result.cpu_total_ms == 300.0
    assert result.streams == {"SESSIONS": (24.0, 12_000.0), "INPUTS": (2.0, 800.0)}
    assert result.bus == {"in_msgs": 60.0, "out_msgs": 100.0}
    assert result.clients == {"loop": {"in_msgs": 10.0, "out_msgs": 14.0}}
    assert result.database == {"xact_commit": 8.0, "wal_sync": 4.0, "wal_bytes": 16_000.0}
    assert result.statements == {"ledger": 18.0, "projector": 6.0}
    assert result.top_statements[0] == ("ledger: INSERT INTO a", 12.0)
    assert {k for k, _ in result.top_statements[1:]} == {"ledger: SELECT b", "projector: SELECT c"}


def test_sheet_without_statement_stats_says_so() -> None:
    result = sheet(_counters(0.0, 1, statements=False), _counters(1.0, 2, statements=False), 5)

    assert result.statements is None
    assert any("n/a" in line for line in result.lines())
    assert result.as_json()["statements_per_turn"] is None


def test_a_process_or_stream_that_appeared_during_the_load_counts_from_zero() -> None:
    assert per_turn({"a": 2.0}, {"a": 4.0, "b": 6.0}, 2) == {"a": 1.0, "b": 3.0}


def test_no_turns_divides_by_one_rather_than_failing() -> None:
    assert per_turn({"a": 1.0}, {"a": 3.0}, 0) == {"a": 2.0}


def test_lag_timeline_is_kept_whole_in_json_and_thinned_when_printed() -> None:
    points = [LagPoint(float(i), {"ledger-ingest": i}) for i in range(20)]
    result = sheet(_counters(0.0, 1), _counters(20.0, 2), 4, points, {"ledger-ingest": "ledger"})

    assert len(result.as_json()["consumer_lag"]) == 20
    assert result.as_json()["consumer_lag"][3] == {"at": 3.0, "ledger-ingest": 3}
    shown = thin(points, 8)
    assert next(p.at for p in shown) == 0.0
    assert shown[-1].at == 19.0
    assert len(shown) == 8
    row = next(line for line in result.lines() if "ledger-ingest" in line)
    assert row.split()[1] == "ledger"
    assert row.split()[-1] == "19"


def test_printed_sheet_orders_processes_by_cost_with_their_share() -> None:
    lines = sheet(_counters(0.0, 1), _counters(1.0, 2), 1).lines()
    loop = next(i for i, line in enumerate(lines) if line.strip().startswith("loop"))
    postgres = next(i for i, line in enumerate(lines) if line.strip().startswith("postgres "))

    assert loop < postgres
    assert lines[loop].split()[1:] == ["1000.0", "67%"]


def test_the_cpu_after_the_load_until_every_consumer_caught_up_counts_beside_it() -> None:
    during = sheet(_counters(0.0, 1), _counters(10.0, 2), turns=4)
    assert during.catch_up_ms == {}
    assert not any("caught up" in line for line in during.lines())

    result = during.with_catch_up(_counters(10.0, 2), _counters(13.0, 3))

    assert result.cpu_ms == {"loop": 250.0, "postgres": 125.0}  # the load's window, unchanged
    assert result.catch_up_ms == {"loop": 250.0, "postgres": 125.0}
    assert result.catch_up_total_ms == 375.0
    assert result.catch_up_s == 3.0
    loop = next(line for line in result.lines() if line.strip().startswith("loop"))
    assert loop.split()[1:] == ["250.0", "67%", "250.0", "500.0"]
    total = next(line for line in result.lines() if line.strip().startswith("all"))
    assert total.split()[1:] == ["375.0", "375.0", "750.0"]
    assert result.as_json()["catch_up_cpu_ms_per_turn"] == {"loop": 250.0, "postgres": 125.0}
    assert result.as_json()["catch_up_seconds"] == 3.0


def test_bus_clients_are_summed_by_user() -> None:
    connections: list[dict[str, object]] = [
        {
            "authorized_user": "projector",
            "name": "a",
            "in_msgs": 3,
            "out_msgs": 5,
            "in_bytes": 30,
            "out_bytes": 50,
        },
        {
            "authorized_user": "projector",
            "in_msgs": 1,
            "out_msgs": 2,
            "in_bytes": 10,
            "out_bytes": 20,
        },
        {"in_msgs": 7, "out_msgs": 0, "in_bytes": 70, "out_bytes": 0},
    ]

    assert by_client(connections) == {
        "projector": {"in_msgs": 4, "in_bytes": 40, "out_msgs": 7, "out_bytes": 70},
        "?": {"in_msgs": 7, "in_bytes": 70, "out_msgs": 0, "out_bytes": 0},
    }


def test_machine_time_is_shared_out_by_kind_over_the_run() -> None:
    before = {"user": 1000, "system": 200, "idle": 500, "iowait": 10, "steal": 90, "softirq": 0}
    after = {"user": 1600, "system": 300, "idle": 600, "iowait": 30, "steal": 190, "softirq": 80}
    shares = machine_shares(before, after)
    assert shares == pytest.approx({"busy": 0.78, "steal": 0.1, "iowait": 0.02, "idle": 0.1})
    assert machine_shares(after, after) == {}


def test_the_sheet_says_how_much_of_the_machine_the_host_took() -> None:
    found = sheet(_counters(0.0, 1), _counters(10.0, 2), turns=100)
    assert found.machine == {"busy": 0.6, "steal": 0.1, "iowait": 0.0, "idle": 0.3}
    assert "  machine, all cores: busy 60%, steal 10%, iowait 0%, idle 30%" in found.lines()
    assert found.as_json()["machine"]["steal"] == 0.1


def test_machine_times_reads_the_kernel_counters() -> None:
    times = machine_times()
    assert times["user"] > 0
    assert set(times) >= {"user", "system", "idle", "steal"}
