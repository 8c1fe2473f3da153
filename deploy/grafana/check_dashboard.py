#!/usr/bin/env python3
"""Structural check of a Grafana dashboard JSON, plus its queries as a Prometheus rules file.

    check_dashboard.py DASHBOARD.json RULES_OUT.yaml

No offline Grafana linter exists: this checks uid, title, unique panel ids (rows' nested panels
included), a datasource and gridPos on every panel, a refId and expr on every target, then
writes every expr as a recording rule (Grafana variables replaced by plain values) so that
`promtool check rules RULES_OUT.yaml` parses each one.
"""
import json
import re
import sys


def main() -> int:
    path, out = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    errors = []
    for key in ("uid", "title"):
        if not isinstance(d.get(key), str) or not d[key].strip():
            errors.append(f"dashboard has no {key}")
    if d.get("uid") and not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]):
        errors.append(f"uid {d['uid']!r} is not 1-40 of [A-Za-z0-9_-]")
    panels = []
    for p in d.get("panels", []):
        panels.append(p)
        panels.extend(p.get("panels", []))
    if not panels:
        errors.append("no panels")
    ids = [p.get("id") for p in panels]
    if any(not isinstance(i, int) for i in ids):
        errors.append("a panel has no integer id")
    dup = sorted({i for i in ids if ids.count(i) > 1 and i is not None})
    if dup:
        errors.append(f"duplicate panel ids: {dup}")
    exprs = []
    for p in panels:
        name = f"panel {p.get('id')} ({p.get('title')!r})"
        if not p.get("title"):
            errors.append(f"{name}: no title")
        if "gridPos" not in p:
            errors.append(f"{name}: no gridPos")
        if p.get("type") == "row":
            continue
        if not p.get("datasource"):
            errors.append(f"{name}: no datasource")
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"{name}: no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or None in refs:
            errors.append(f"{name}: missing or duplicate refId")
        for t in targets:
            e = t.get("expr", "")
            if not e.strip():
                errors.append(f"{name}: target {t.get('refId')} has no expr")
                continue
            if "actiond_" not in e:
                errors.append(f"{name}: expr does not use an actiond_ metric: {e}")
            exprs.append((p.get("id"), t.get("refId"), e))
    # Grafana variables → values promtool accepts.
    subst = [
        (r"\$__rate_interval|\$__interval|\$__range", "5m"),
        (r"\$\{?namespace\}?", ".*"),
        (r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "x"),
    ]
    lines = ["groups:", "  - name: dashboard-exprs", "    rules:"]
    for pid, ref, e in exprs:
        for pat, rep in subst:
            e = re.sub(pat, rep, e)
        lines.append(f"      - record: dashboard:panel_{pid}_{ref}")
        lines.append(f"        expr: {json.dumps(e)}")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    print(f"{path}: {len(panels)} panels, {len(exprs)} queries, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
