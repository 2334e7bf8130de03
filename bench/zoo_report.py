"""The printed report of the transformers sweep (bench/zoo.py), from its rows.

``totals(rows)`` and ``families(rows)`` are docs/benchmarks.md's tables; ``report(rows)`` prints
them with the lists a person acts on: models where bytegraph has more graphs or fewer ops than
torch.compile, failures (not equal, errors, crashes, timeouts), recompiles on an identical second
call, bytegraph's internal errors, the most common break reasons and what was not built.
"""

from __future__ import annotations

import collections
import re
import statistics
from typing import Any

from bench.zoo_worker import SYSTEMS

BG, TC = SYSTEMS


def built(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "built"]


def ran(row: dict[str, Any], system: str) -> bool:
    return bool(row.get(system, {}).get("ran"))


def equal(row: dict[str, Any], system: str) -> bool:
    return ran(row, system) and bool(row[system].get("equal"))


def _sum(rows: list[dict[str, Any]], system: str, key: str) -> float:
    return sum(r[system].get(key, 0) for r in rows if ran(r, system))


def _times(rows: list[dict[str, Any]], system: str) -> list[float]:
    return [r[system]["first_s"] for r in rows if ran(r, system)]


def system_totals(rows: list[dict[str, Any]], system: str) -> dict[str, Any]:
    """The numbers of one column of the totals table."""
    times = _times(rows, system)
    return {
        "equal": sum(equal(r, system) for r in rows),
        "failed": sum(not ran(r, system) for r in rows),
        "one_graph": sum(ran(r, system) and r[system]["graphs"] == 1 for r in rows),
        "graphs": int(_sum(rows, system, "graphs")),
        "ops": int(_sum(rows, system, "ops")),
        "recompiles": sum(ran(r, system) and r[system].get("second_graphs", 0) > 0
                          for r in rows),
        "median_s": statistics.median(times) if times else 0.0,
        "total_s": sum(times),
    }


def totals(rows: list[dict[str, Any]]) -> list[list[str]]:
    """The totals table, bytegraph and torch.compile side by side (built models only)."""
    ok = built(rows)
    bg, tc = system_totals(ok, BG), system_totals(ok, TC)
    n = len(ok)

    def runs(t: dict[str, Any]) -> str:
        return f"{t['equal']} / {n}" + (f" ({t['failed']} failed)" if t["failed"] else "")

    ratio = bg["ops"] / tc["ops"] if tc["ops"] else 0.0
    time_ratio = bg["total_s"] / tc["total_s"] if tc["total_s"] else 0.0
    breaks = sum(r[BG].get("break_count", 0) for r in ok if ran(r, BG))
    internal = sum(r.get(BG, {}).get("internal_errors", 0) > 0 for r in ok)
    return [
        ["", "torch.compile", "bytegraph"],
        ["runs, equal to eager", runs(tc), runs(bg)],
        ["one graph", str(tc["one_graph"]), str(bg["one_graph"])],
        ["graphs in total", f"{tc['graphs']:,}", f"{bg['graphs']:,}"],
        ["ops captured", f"{tc['ops']:,}", f"{bg['ops']:,} ({ratio:.2f}x)"],
        ["recompiles on a second identical call", str(tc["recompiles"]), str(bg["recompiles"])],
        ["compile + first call, median", f"{tc['median_s']:.2f} s", f"{bg['median_s']:.2f} s"],
        ["compile + first call, total", f"{tc['total_s']:.0f} s",
         f"{bg['total_s']:.0f} s ({time_ratio:.2f}x)"],
        ["graph breaks (bytegraph's explain)", "", f"{breaks:,}"],
        ["internal errors fallen back from", "", str(internal)],
    ] + _nested_ops_row(ok)


def _nested_ops_row(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Ops counted with the bodies of higher-order ops (subgraphs installed in the graphs),
    where the rows have them (runs since bench/zoo_worker.py counts them)."""
    if not any("ops_all" in r.get(s, {}) for r in rows for s in (BG, TC)):
        return []
    bg, tc = _sum(rows, BG, "ops_all"), _sum(rows, TC, "ops_all")
    ratio = bg / tc if tc else 0.0
    return [["ops with subgraph bodies", f"{int(tc):,}", f"{int(bg):,} ({ratio:.2f}x)"]]


def families(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Per family: built, equal, one graph, graphs and ops, bytegraph / torch.compile."""
    table = [["family", "built", "equal bg/tc", "one graph bg/tc", "graphs bg/tc",
              "ops bg/tc", "first s bg/tc"]]
    by_family: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    for family in sorted(by_family, key=lambda f: -len(by_family[f])):
        group = by_family[family]
        ok = built(group)
        bg, tc = system_totals(ok, BG), system_totals(ok, TC)

        def pair(key: str, fmt: str = "{}", a: dict = bg, b: dict = tc) -> str:
            return f"{fmt.format(a[key])} / {fmt.format(b[key])}"

        table.append([family, f"{len(ok)} / {len(group)}", pair("equal"), pair("one_graph"),
                      pair("graphs"), pair("ops"), pair("total_s", "{:.0f}")])
    return table


def markdown(table: list[list[str]]) -> str:
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
    return "\n".join(lines)


def reason_key(text: str, class_name: str = "") -> str:
    """A break reason with what varies between models stripped, so the same cause aggregates."""
    prefix = re.sub(r"(Model|ForCausalLM)$", "", class_name)
    if len(prefix) > 2:
        text = re.sub(rf"\b{re.escape(prefix)}(?=[A-Z_])", "*", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "0x..", text)
    text = re.sub(r"'[^']*'", "'..'", text)
    text = re.sub(r"modeling_\w+\.py", "modeling_*.py", text)
    text = re.sub(r"\b\d+(\.\d+)?\b", "N", text)
    return text


def break_reasons(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, list[str]]]:
    """(reason, models, breaks, example models), most models first."""
    models: dict[str, list[str]] = collections.defaultdict(list)
    count: collections.Counter[str] = collections.Counter()
    for row in built(rows):
        for b in row.get(BG, {}).get("breaks", []):
            key = f"{b['entry']}: {reason_key(b['reason'], row.get('class', ''))}"
            count[key] += b.get("count", 1)
            if row["name"] not in models[key]:
                models[key].append(row["name"])
    ranked = sorted(models, key=lambda k: (-len(models[k]), -count[k], k))
    return [(k, len(models[k]), count[k], models[k]) for k in ranked]


def _error(row: dict[str, Any], system: str) -> str:
    r = row.get(system, {})
    if not r.get("ran"):
        e = r.get("error", {})
        return f"{e.get('kind', '?')} {e.get('message', '?')} [{e.get('where', '')}]"
    return f"not equal: {r.get('mismatch')}"


def print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for j, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))


def worse(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in built(rows) if ran(r, BG) and ran(r, TC) and (
        r[BG]["graphs"] > r[TC]["graphs"] or r[BG]["ops"] < r[TC]["ops"])]


def report(rows: list[dict[str, Any]]) -> None:
    ok = built(rows)
    print(f"\n{len(ok)} of {len(rows)} architectures built and ran eagerly; "
          f"bg = bytegraph, tc = torch.compile (a counting backend that runs the graphs)\n")
    print_table(totals(rows))
    print()
    print_table(families(rows))
    _print_worse(rows)
    _print_failures(ok)
    recompiled = [f"{r['name']} (bg {r[BG].get('second_graphs', 0)}, "
                  f"tc {r.get(TC, {}).get('second_graphs', 0)})"
                  for r in ok if any(ran(r, s) and r[s].get("second_graphs") for s in SYSTEMS)]
    print(f"\nrecompiles on the second identical call, graphs bg/tc ({len(recompiled)}): "
          + ", ".join(recompiled))
    internal = [f"{r['name']}: {w}" for r in ok for w in r.get(BG, {}).get("warnings", [])]
    print(f"\nbytegraph warnings (internal errors fallen back from, limits) ({len(internal)}):")
    for line in internal:
        print(f"  {line[:220]}")
    reasons = break_reasons(rows)
    print(f"\ngraph-break reasons of bytegraph ({len(reasons)} kinds), most models first:")
    for key, n_models, n_breaks, names in reasons[:30]:
        print(f"  {n_models:4d} models {n_breaks:5d} breaks  {key[:150]}  e.g. "
              + ", ".join(names[:5]))
    not_built = [r for r in rows if r.get("status") != "built"]
    print(f"\nnot built ({len(not_built)}):")
    for r in not_built:
        print(f"  {r['name']}: {r.get('reason', '')[:160]}")


def _print_worse(rows: list[dict[str, Any]]) -> None:
    found = worse(rows)
    print(f"\nmore graphs or fewer ops than torch.compile ({len(found)}): "
          "graphs bg/tc, ops bg/tc, first break")
    for r in sorted(found, key=lambda r: r[TC]["graphs"] - r[BG]["graphs"]):
        first = r[BG].get("breaks")
        why = f"{first[0]['entry']}: {first[0]['reason']}"[:120] if first else "(no break)"
        print(f"  {r['name']}: {r[BG]['graphs']}/{r[TC]['graphs']}, "
              f"{r[BG]['ops']}/{r[TC]['ops']}  {why}")


def _print_failures(ok: list[dict[str, Any]]) -> None:
    for system in SYSTEMS:
        failed = [r for r in ok if not equal(r, system)]
        print(f"\n{system}: not equal to eager or failed ({len(failed)}):")
        for r in failed:
            print(f"  {r['name']}: {_error(r, system)[:220]}")
