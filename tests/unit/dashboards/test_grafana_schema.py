"""The dashboards against Grafana's own published dashboard model (the grafana-foundation-sdk
for Grafana 10.1, generated from Grafana's schema): each one loads into it, and every field
the dashboards set survives the round trip through it -- a misspelt or invented field would
be dropped -- except the few that Grafana keeps outside its schema, each named here with why.
(No Grafana server can be run on this machine: no Debian package, and the Go module proxy
refuses github.com/grafana/grafana.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

DASH = Path(__file__).resolve().parents[3] / "dashboards"
NAMES = sorted(p.name for p in DASH.glob("*.json"))

#: Fields Grafana reads that its published dashboard schema does not model.
OUTSIDE_THE_SCHEMA = {
    "/annotations/list[]/builtIn": "marks Grafana's own 'Annotations & Alerts' query",
    "/annotations/list[]/step": "Prometheus annotation query option (the datasource's)",
    "/annotations/list[]/tagKeys": "Prometheus annotation query option",
    "/annotations/list[]/textFormat": "Prometheus annotation query option",
    "/annotations/list[]/titleFormat": "Prometheus annotation query option",
    "/annotations/list[]/useValueForTime": "Prometheus annotation query option",
    "/templating/list[]/definition": "a query variable's text, as Grafana's editor saves it",
}


def paths(value: Any, at: str = "") -> set[str]:
    """Every field path in a JSON value, list indices left out."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            out.add(f"{at}/{key}")
            out |= paths(item, f"{at}/{key}")
    elif isinstance(value, list):
        for item in value:
            out |= paths(item, f"{at}[]")
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_field_is_grafanas_or_named(name: str) -> None:
    data = json.loads((DASH / name).read_text())
    model = Dashboard.from_json(data)
    assert model.title == data["title"]
    assert len(model.panels or []) == len(data["panels"])
    kept = json.loads(json.dumps(model, cls=JSONEncoder))
    dropped = paths(data) - paths(kept)
    unknown = sorted(p for p in dropped if p not in OUTSIDE_THE_SCHEMA)
    assert unknown == [], f"{name}: fields Grafana's schema does not have: {unknown}"


def test_a_misspelt_field_would_be_caught() -> None:
    data = json.loads((DASH / NAMES[0]).read_text())
    data["panels"][0]["gridpos"] = data["panels"][0].pop("gridPos")
    kept = json.loads(json.dumps(Dashboard.from_json(data), cls=JSONEncoder))
    assert "/panels[]/gridpos" in paths(data) - paths(kept)
