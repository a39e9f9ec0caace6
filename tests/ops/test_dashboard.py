"""The instructor's Grafana dashboard and the Prometheus config read only what felab serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

from felab_core.ops.metrics import FleetCollector  # (defines felab's metrics in the registry)

ROOT = Path(__file__).resolve().parents[2]
#: Gauges read from the database and the broker at scrape time (FleetCollector, not in the
#: default registry), with every fact it can be given.
_FACTS = {"depth": {1: 0}, "age": {1: 1.0}, "pending": 0, "dead": 0, "inbox": 3,
          "inbox_oldest_s": 40.0}  # fmt: skip
COLLECTED = {family.name for family in FleetCollector(lambda: _FACTS).collect()}


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
    assert {"felab_ingest_inbox_waiting", "felab_ingest_inbox_oldest_seconds"} <= COLLECTED


def test_prometheus_scrapes_the_bot_and_the_ingest() -> None:
    config = yaml.safe_load((ROOT / "docs" / "prometheus.yml").read_text())
    targets = config["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["bot:9100", "ingest:9100"]
