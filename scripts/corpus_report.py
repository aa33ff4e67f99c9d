"""How `runwatch diagnose`'s reading does on the corpora of real consoles (issue 41).

    .venv/bin/python scripts/corpus_report.py                    # every corpus, dev and held out
    .venv/bin/python scripts/corpus_report.py --corpus corpus2   # one corpus
    .venv/bin/python scripts/corpus_report.py --files            # ... and every dev file's result
    .venv/bin/python scripts/corpus_report.py --watch --corpus corpus2   # watch against diagnose

Reads every excerpt of tests/fixtures/consoles/{corpus,corpus2,...}/{dev,heldout}/ with
`runwatch.diagnose.diagnose` -- the excerpt alone, not the file's `#` header, which says in
words what happened -- and prints, for each corpus, for its development part and for its
held-out part separately:

- recall per class: of the excerpts whose labels say a rule must fire, how many it fires on
  (an excerpt with two rules counts once in each class);
- for `non_finite_metric`, how many of the found ones name the labelled key, and the
  labelled step where the label has one;
- false alerts: controls on which any rule fires;
- extra rules: failure excerpts on which a rule fires that their labels do not name;
- crashes: excerpts on which the reading raised;
- how many excerpts fire exactly the rules of their labels.

It reports and does not fail (exit 0 unless the corpus cannot be read). Per-file results are
printed for the development part only (`--files`): the held-out part is reported as figures,
so nobody tunes the reader on its excerpts.

`--watch` plays each development excerpt through `runwatch watch` into `runwatch serve` and
prints where its alerts differ from diagnose's (scripts/corpus_watch.py); held-out parts are
never played.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import tomllib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from runwatch.diagnose import diagnose
from runwatch.stream.config import RulesConfig

CONSOLES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "consoles"
#: the corpora, every `corpus*` folder here with a manifest, in order: each split into dev/
#: (MANIFEST.toml) and heldout/ (HELDOUT.toml) before any reader change
CORPORA = tuple(
    sorted(
        (p.name for p in CONSOLES.glob("corpus*") if (p / "MANIFEST.toml").is_file()),
        key=lambda name: int(name.removeprefix("corpus") or 1),
    )
)
CLASSES = (
    "collective_timeout",
    "ranks_stalled",
    "component_failed",
    "non_finite_metric",
    "inference_stalled",
    "weight_sync_stalled",
    "zero_reward",
)
#: the day of timestamps without a date (as tests/unit/test_field_consoles.py reads)
DAY = date(2026, 11, 24)


@dataclass
class Result:
    ident: str
    expected: list[str]
    fired: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    crash: str | None = None
    seconds: float = 0.0


def read_part(corpus: str, part: str) -> dict[str, dict[str, Any]]:
    manifest = "MANIFEST.toml" if part == "dev" else "HELDOUT.toml"
    return tomllib.loads((CONSOLES / corpus / manifest).read_text(encoding="utf-8"))


def excerpt_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of a file's lines after its header (`# source:`, `# what happened:`):
    the excerpt as the user posted it. The header says in words what went wrong; a reader
    must not be measured on that."""
    with path.open("rb") as f:
        header = True
        for number, line in enumerate(f, 1):
            if header and line.startswith(b"#"):
                continue
            header = False
            yield number, line


def run_one(path: Path, expected: list[str], config: RulesConfig | None = None) -> Result:
    """Diagnose one excerpt (`config`: the rules' settings, else the defaults)."""
    result = Result(path.stem, sorted(expected))
    start = time.perf_counter()
    try:
        found = diagnose([path], config=config, day=DAY, lines=excerpt_lines)
    except Exception as exc:  # a crash is a figure of the report, not the end of it
        result.crash = "".join(traceback.format_exception_only(exc)).strip()
    else:
        firing = [a for a in found.alerts if a.state == "firing"]
        result.fired = sorted({a.rule for a in firing})
        result.summaries = [f"{a.rule}: {a.summary}" for a in firing]
    result.seconds = time.perf_counter() - start
    return result


def _names(text: str, key: str) -> bool:
    return key.lower() in text.lower()


def report(corpus: str, part: str, show_files: bool) -> dict[str, Any]:
    labels = read_part(corpus, part)
    folder = CONSOLES / corpus / part
    results = {i: run_one(folder / f"{i}.log", e["rules"]) for i, e in labels.items()}
    controls = [r for r in results.values() if not r.expected]
    failures = [r for r in results.values() if r.expected]
    print(
        f"\n== {corpus} {part}: {len(results)} excerpts"
        f" ({len(failures)} failures, {len(controls)} controls)"
    )
    figures: dict[str, Any] = {"recall": {}}
    for rule in CLASSES:
        should = [r for r in failures if rule in r.expected]
        if not should:
            print(f"  {rule:22} -      (no excerpt)")
            continue
        hit = [r for r in should if rule in r.fired]
        figures["recall"][rule] = (len(hit), len(should))
        line = f"  {rule:22} {len(hit):3} / {len(should):<3} ({100 * len(hit) / len(should):3.0f}%)"
        if rule == "non_finite_metric":
            key_named = step_named = step_labelled = 0
            for r in hit:
                entry = labels[r.ident]
                said = " | ".join(s for s in r.summaries if s.startswith(rule))
                key_named += any(_names(said, k) for k in entry.get("keys", []))
                if "step" in entry:
                    step_labelled += 1
                    step_named += re.search(rf"\b{entry['step']}\b", said) is not None
            line += f"   key named {key_named}/{len(hit)}, step named {step_named}/{step_labelled}"
        print(line)
    total_hit = sum(h for h, _ in figures["recall"].values())
    total = sum(n for _, n in figures["recall"].values())
    print(
        f"  {'all classes':22} {total_hit:3} / {total:<3} ({100 * total_hit / max(total, 1):3.0f}%)"
    )
    false = [r for r in controls if r.fired]
    extra = [r for r in failures if set(r.fired) - set(r.expected)]
    crashes = [r for r in results.values() if r.crash]
    print(f"  false alerts on controls: {len(false)} / {len(controls)}")
    print(f"  failures with an extra rule: {len(extra)} / {len(failures)}")
    print(f"  crashes: {len(crashes)}")
    exact = [r for r in results.values() if r.fired == r.expected and not r.crash]
    print(f"  excerpts read exactly as labelled: {len(exact)} / {len(results)}")
    slowest = max(results.values(), key=lambda r: r.seconds)
    print(
        f"  slowest read: {slowest.seconds:.2f} s" + (f" ({slowest.ident})" if show_files else "")
    )
    figures.update(false=len(false), controls=len(controls), extra=len(extra), crashes=len(crashes))
    if show_files and part == "dev":
        print("\n  per file (expected -> fired):")
        for r in sorted(results.values(), key=lambda r: r.ident):
            mark = "ok " if r.fired == r.expected and not r.crash else "-- "
            got = f"CRASH {r.crash}" if r.crash else (", ".join(r.fired) or "nothing")
            print(f"  {mark}{r.ident}: {', '.join(r.expected) or 'control'} -> {got}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="print each dev file's result")
    parser.add_argument("--part", choices=("dev", "heldout", "both"), default="both")
    parser.add_argument("--corpus", choices=(*CORPORA, "all"), default="all")
    parser.add_argument(
        "--watch", action="store_true", help="dev parts through `runwatch watch` against diagnose"
    )
    args = parser.parse_args(argv)
    if args.watch:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from scripts import corpus_watch

        return corpus_watch.main([c for c in CORPORA if args.corpus in (c, "all")])
    sums: dict[str, list[dict[str, Any]]] = {"dev": [], "heldout": []}
    for corpus in CORPORA:
        if args.corpus not in (corpus, "all"):
            continue
        for part in ("dev", "heldout"):
            if args.part in (part, "both"):
                sums[part].append(report(corpus, part, args.files))
    for part, figures in sums.items():
        if len(figures) > 1:
            print_totals(part, figures)
    return 0


def print_totals(part: str, figures: list[dict[str, Any]]) -> None:
    """The figures of one part summed over the corpora read: the issue's bar is on these."""
    print(f"\n== all corpora read, {part}")
    hit_all = total_all = 0
    for rule in CLASSES:
        pairs = [f["recall"][rule] for f in figures if rule in f["recall"]]
        hit, total = sum(h for h, _ in pairs), sum(n for _, n in pairs)
        hit_all, total_all = hit_all + hit, total_all + total
        if total:
            print(f"  {rule:22} {hit:4} / {total:<4} ({100 * hit / total:5.1f}%)")
    share = 100 * hit_all / max(total_all, 1)
    print(f"  {'all classes':22} {hit_all:4} / {total_all:<4} ({share:5.1f}%)")
    for name in ("false", "extra", "crashes"):
        print(f"  {name:22} {sum(f[name] for f in figures):4}", end="")
        print(f" / {sum(f['controls'] for f in figures)} controls" if name == "false" else "")


if __name__ == "__main__":
    sys.exit(main())
