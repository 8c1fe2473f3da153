#!/usr/bin/env python3
"""Checks on `helm template` output that kubernetes-validate cannot do (it has no schema for the
Prometheus Operator CRDs) plus the chart's own promises.

    check_rendered.py RENDERED.yaml RULES_OUT.yaml DASHBOARD.json [--expect-breakglass]

- every container: runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop ALL,
  seccomp RuntimeDefault; probes on /healthz and /readyz at the admin port; ADMIN_LISTEN 0.0.0.0;
- secrets: each service mounts only its own; the api mounts none; no literal secret in env;
  breakglass-*.pub mounted only when expected;
- every pod's terminationGracePeriodSeconds equals the systemd units' TimeoutStopSec and is
  above the services' 10 s drain;
- the migrate Job is a pre-install,pre-upgrade hook running `migrate`;
- the PrometheusRule's groups are written to RULES_OUT (for promtool check rules);
- the dashboard ConfigMap equals DASHBOARD.json; a ServiceMonitor has endpoints.
"""
import glob
import json
import os
import re
import sys

import yaml

errors = []


def err(msg):
    errors.append(msg)


def main():
    rendered, rules_out, dashboard = sys.argv[1:4]
    expect_bg = "--expect-breakglass" in sys.argv
    docs = [d for d in yaml.safe_load_all(open(rendered, encoding="utf-8")) if d]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    deps = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in kinds.get("Deployment", [])}
    if sorted(deps) != ["api", "executor", "policy", "sealer", "web"]:
        err(f"Deployments: {sorted(deps)}")
    allowed_secrets = {
        "api": set(),
        "policy": {"grant_signing_key"},
        "sealer": {"audit_seal_key"},
        "executor": {"credentials", "trusted_keys"},
        "web": {"grant_signing_key", "oidc_client_secret"},
    }
    units = glob.glob(os.path.join(os.path.dirname(__file__), "../../packaging/systemd/*.service"))
    stop = set()
    for u in units:
        if u.endswith("-migrate.service"):  # a oneshot, not a drained service
            continue
        m = re.search(r"^TimeoutStopSec=(\d+)s?$", open(u, encoding="utf-8").read(), re.M)
        stop.add(int(m.group(1)) if m else None)
    if len(stop) != 1 or None in stop:
        err(f"systemd units: TimeoutStopSec differs or is missing: {stop}")
    drain = 10
    for comp, d in deps.items():
        spec = d["spec"]["template"]["spec"]
        grace = spec.get("terminationGracePeriodSeconds")
        if grace not in stop or not isinstance(grace, int) or grace <= drain:
            err(f"{comp}: terminationGracePeriodSeconds {grace} must equal TimeoutStopSec {stop} and exceed the {drain} s drain")
        if spec.get("automountServiceAccountToken") is not False:
            err(f"{comp}: service account token is mounted")
        psc = spec.get("securityContext", {})
        for c in spec["containers"]:
            sc = c.get("securityContext", {})
            if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
                err(f"{comp}: runAsNonRoot missing")
            if sc.get("readOnlyRootFilesystem") is not True:
                err(f"{comp}: readOnlyRootFilesystem not true")
            if sc.get("allowPrivilegeEscalation") is not False:
                err(f"{comp}: allowPrivilegeEscalation not false")
            if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                err(f"{comp}: capabilities not drop ALL")
            if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                err(f"{comp}: seccomp not RuntimeDefault")
            if c.get("args") != ({"sealer": ["audit", "seal"]}.get(comp) or [comp]):
                err(f"{comp}: args {c.get('args')}")
            if c["livenessProbe"]["httpGet"] != {"path": "/healthz", "port": "admin"}:
                err(f"{comp}: liveness probe")
            if c["readinessProbe"]["httpGet"] != {"path": "/readyz", "port": "admin"}:
                err(f"{comp}: readiness probe")
            env = {e["name"]: e for e in c.get("env", [])}
            admin = env.get(f"ACTIOND_{comp.upper()}_ADMIN_LISTEN", {}).get("value", "")
            if not admin.startswith("0.0.0.0:"):
                err(f"{comp}: ACTIOND_{comp.upper()}_ADMIN_LISTEN={admin!r}")
            db = env.get("DATABASE_URL", {})
            ref = db.get("valueFrom", {}).get("secretKeyRef", {})
            if not ref.get("name") or "value" in db:
                err(f"{comp}: DATABASE_URL must come from a Secret")
            for name, e in env.items():
                v = str(e.get("value", ""))
                if any(s in name for s in ("SECRET", "PASSWORD", "TOKEN")) or "://" in v and "@" in v:
                    err(f"{comp}: env {name} looks like a literal secret")
            if comp != "api":
                if env.get("CREDENTIALS_DIRECTORY", {}).get("value") != "/run/actiond/credentials":
                    err(f"{comp}: CREDENTIALS_DIRECTORY not the mount")
                if env.get(f"ACTIOND_{comp.upper()}_CREDENTIALS_DIR", {}).get("value") != "/run/actiond/credentials":
                    err(f"{comp}: ACTIOND_{comp.upper()}_CREDENTIALS_DIR not the mount")
        # Secret files this service mounts.
        files = set()
        for v in spec.get("volumes", []):
            if "secret" in v:
                items = v["secret"].get("items")
                if items is None:
                    files.add("credentials" if v["name"] == "credentials" else v["name"])
                else:
                    for it in items:
                        files.add("trusted_keys" if v["name"] == "trusted-keys" else it["path"])
                        if it["path"].startswith("breakglass-") and not expect_bg:
                            err(f"{comp}: break-glass key mounted although breakGlass is off")
                if comp == "executor" and v["name"] == "trusted-keys":
                    bg = [it for it in items or [] if it["path"].startswith("breakglass-")]
                    if expect_bg and not bg:
                        err("executor: breakGlass enabled but no breakglass-*.pub mounted")
            if "projected" in v:
                for s in v["projected"]["sources"]:
                    for it in (s.get("secret", {}).get("items") or []):
                        files.add(it["path"])
        if not files <= allowed_secrets[comp] or (comp != "api" and not files):
            err(f"{comp}: mounts secrets {sorted(files)}, expected within {sorted(allowed_secrets[comp])}")
    # Workload-JWT issuers: a ConfigMap the api mounts and names in ACTIOND_API_JWT_ISSUERS_FILE.
    cms = [c for c in kinds.get("ConfigMap", []) if c["metadata"]["name"].endswith("-api-jwt-issuers")]
    api_env = {e["name"]: e.get("value") for e in deps["api"]["spec"]["template"]["spec"]["containers"][0].get("env", [])} if "api" in deps else {}
    if cms:
        issuers = yaml.safe_load(cms[0]["data"]["issuers.yaml"])
        if not isinstance(issuers, dict) or not issuers.get("issuers"):
            err("api-jwt-issuers ConfigMap: issuers.yaml has no issuers list")
        mounts = deps["api"]["spec"]["template"]["spec"]["containers"][0].get("volumeMounts", [])
        paths = [m["mountPath"] + "/issuers.yaml" for m in mounts if m["name"] == "jwt-issuers"]
        if api_env.get("ACTIOND_API_JWT_ISSUERS_FILE") not in paths or not paths:
            err(f"api: ACTIOND_API_JWT_ISSUERS_FILE {api_env.get('ACTIOND_API_JWT_ISSUERS_FILE')} is not the mounted issuers.yaml {paths}")
    elif "ACTIOND_API_JWT_ISSUERS_FILE" in api_env:
        err("api: ACTIOND_API_JWT_ISSUERS_FILE set without the issuers ConfigMap")
    jobs = kinds.get("Job", [])
    if len(jobs) != 1:
        err(f"{len(jobs)} Jobs, expected the migrate Job")
    else:
        j = jobs[0]
        if j["metadata"].get("annotations", {}).get("helm.sh/hook") != "pre-install,pre-upgrade":
            err("migrate Job is not a pre-install,pre-upgrade hook")
        if j["spec"]["template"]["spec"]["containers"][0].get("args") != ["migrate"]:
            err("migrate Job does not run `actiond migrate`")
    hpas = {h["spec"]["scaleTargetRef"]["name"].rsplit("-", 1)[-1] for h in kinds.get("HorizontalPodAutoscaler", [])}
    if not {"api", "web"} <= hpas:
        err(f"HPAs for {sorted(hpas)}, expected api and web")
    svcs = {s["metadata"]["name"].rsplit("-", 1)[-1] for s in kinds.get("Service", [])}
    if not {"api", "web", "metrics"} <= svcs:
        err(f"Services {sorted(svcs)}")
    nps = kinds.get("NetworkPolicy", [])
    if nps and not any(n["metadata"]["name"].endswith("default-deny") for n in nps):
        err("NetworkPolicy without a default deny")
    for sm in kinds.get("ServiceMonitor", []):
        eps = sm["spec"].get("endpoints") or []
        if not eps or eps[0].get("port") != "admin" or not sm["spec"].get("selector"):
            err("ServiceMonitor has no admin endpoint or selector")
    prs = kinds.get("PrometheusRule", [])
    groups = []
    for pr in prs:
        groups.extend(pr["spec"]["groups"])
    with open(rules_out, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    want = json.load(open(dashboard, encoding="utf-8"))
    for cm in kinds.get("ConfigMap", []):
        for k, v in cm.get("data", {}).items():
            if k.endswith(".json") and json.loads(v) != want:
                err(f"ConfigMap {cm['metadata']['name']}/{k} differs from {dashboard}")
    for e in errors:
        print(f"{rendered}: {e}", file=sys.stderr)
    print(f"{rendered}: {len(docs)} objects, {len(prs)} PrometheusRule, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
