"""The instructor's Grafana dashboard and the Prometheus config read only what felab serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

import felab_core.ops.metrics  # noqa: F401 (defines felab's metrics in the default registry)

ROOT = Path(__file__).resolve().parents[2]
#: Gauges read from the database at scrape time (FleetCollector), not in the default registry.
COLLECTED = {"felab_queue_depth", "felab_worker_heartbeat_age_seconds", "felab_outbox_pending",
             "felab_outbox_dead"}  # fmt: skip


def _served() -> set[str]:
    names = set(COLLECTED)
    for family in REGISTRY.collect():
        names.update(sample.name for sample in family.samples)
        names.add(family.name)
        if family.type == "counter":  # (a labelled counter has no sample until first counted)
            names.add(f"{family.name}_total")
    return {n for n in names if n.startswith("felab_")}


def test_every_panel_queries_a_metric_felab_serves() -> None:
    dash = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"felab_[a-z_]+", e)}
    served = _served() | {f"{n}_bucket" for n in _served()}
    assert used and used <= served, sorted(used - served)
    assert {"felab_jobs_total", "felab_queue_depth", "felab_outbox_pending"} <= used


def test_prometheus_scrapes_the_bot_and_the_ingest() -> None:
    config = yaml.safe_load((ROOT / "docs" / "prometheus.yml").read_text())
    targets = config["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["bot:9100", "ingest:9100"]
